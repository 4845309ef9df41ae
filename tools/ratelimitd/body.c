/*
 * body.c -- a PUT body to a rule (see request.h).  The library's parser
 * decides what a valid rule is; this file only fills in the rule id from
 * the path, holds the body to that id, and splits the parser's
 * "field: reason" message so the answer can name the field.
 */
#include "request.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define UNKNOWN_FIELD ": unknown field"

/* The field a library message is about: its prefix up to ": unknown
 * field", else up to the first ':' if that is a dotted name. */
static void error_field(const char *msg, char *field, size_t len)
{
    const char *colon = strstr(msg, UNKNOWN_FIELD);
    size_t n;

    field[0] = '\0';
    if (colon && strcmp(colon, UNKNOWN_FIELD) == 0) {
        n = (size_t)(colon - msg);
    } else {
        n = strcspn(msg, ":");
        if (!msg[n] || n == 0 || strspn(msg, "abcdefghijklmnopqrstuvwxyz_.") < n)
            return;
    }
    if (n >= len)
        n = len - 1;
    memcpy(field, msg, n);
    field[n] = '\0';
}

/* Put the path's id into the body unless the body names one itself. */
static int fill_id(json_t *doc, const char *id, char *err, size_t errlen)
{
    if (json_object_get(doc, "rule_id") || json_object_get(doc, "ruleId"))
        return 0;
    if (json_object_set_new(doc, "rule_id", json_string(id)))
        return snprintf(err, errlen, "out of memory"), -1;
    return 0;
}

int body_parse(const char *body, size_t len, const char *id, rl_rule *r,
               char *err, size_t errlen, char *field, size_t fieldlen)
{
    json_error_t jerr;
    json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    int rc;

    memset(r, 0, sizeof *r);
    field[0] = '\0';
    if (!doc) {
        snprintf(err, errlen, "body is not JSON: line %d, column %d: %s",
                 jerr.line, jerr.column, jerr.text);
        return BODY_BAD_JSON;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        snprintf(err, errlen, "body: must be one rule, a JSON object");
        return BODY_INVALID;
    }
    rc = fill_id(doc, id, err, errlen);
    if (rc == 0 && (rc = rule_from_json(doc, r, err, errlen)) != 0)
        error_field(err, field, fieldlen);
    json_decref(doc);
    if (rc != 0)
        return BODY_INVALID;
    if (strcmp(r->id, id) != 0) {
        snprintf(err, errlen, "rule_id: \"%s\" in the body, \"%s\" in the path",
                 r->id, id);
        snprintf(field, fieldlen, "rule_id");
        rule_clear(r);
        memset(r, 0, sizeof *r);
        return BODY_INVALID;
    }
    r->version = 0;
    r->updated_at[0] = '\0';
    return BODY_OK;
}
