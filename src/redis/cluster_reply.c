/*
 * cluster_reply.c -- see cluster_reply.h.  A server we trust can still be
 * mid-upgrade, misconfigured or not Redis at all: nothing here assumes
 * more of a reply than the checks prove.
 */
#include "cluster_reply.h"

#include <stdio.h>
#include <string.h>

/* {host, port, id?, ...}; 0, or -1 if malformed. */
static int endpoint(const redisReply *e, const char *asked,
                    cluster_endpoint *out)
{
    const redisReply *h, *p;

    if (e->type != REDIS_REPLY_ARRAY || e->elements < 2)
        return -1;
    h = e->element[0];
    p = e->element[1];
    if (h->type != REDIS_REPLY_STRING || p->type != REDIS_REPLY_INTEGER ||
        p->integer < 1 || p->integer > 65535 || h->len >= sizeof out->host ||
        memchr(h->str, 0, h->len))
        return -1;
    /* "" or "?": the node does not know its address; use the one asked */
    if (h->len == 0 || h->str[0] == '?') {
        if (!asked[0] || strlen(asked) >= sizeof out->host)
            return -1;
        snprintf(out->host, sizeof out->host, "%s", asked);
    } else {
        memcpy(out->host, h->str, h->len);
        out->host[h->len] = 0;
    }
    out->port = (int)p->integer;
    return 0;
}

/* One range {lo, hi, master, replica...} into rg; 0, or -1. */
static int range(const redisReply *e, const char *asked, cluster_range *rg)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER)
        return -1;
    long long lo = e->element[0]->integer, hi = e->element[1]->integer;
    if (lo < 0 || hi >= CLUSTER_NSLOTS || lo > hi ||
        endpoint(e->element[2], asked, &rg->master))
        return -1;
    rg->lo = (int)lo;
    rg->hi = (int)hi;
    rg->nreplicas = 0;
    for (size_t k = 3; k < e->elements; k++) {
        cluster_endpoint ep;
        if (endpoint(e->element[k], asked, &ep))
            return -1;
        if (rg->nreplicas < CLUSTER_REPLICAS_MAX)
            rg->replica[rg->nreplicas++] = ep;
    }
    return 0;
}

int cluster_slots_parse(const redisReply *r, const char *asked,
                        int (*fn)(const cluster_range *rg, void *arg),
                        void *arg)
{
    unsigned char seen[CLUSTER_NSLOTS / 8] = {0};
    cluster_range rg;
    int covered = 0;

    if (r->type != REDIS_REPLY_ARRAY)
        return -1;
    for (size_t i = 0; i < r->elements; i++) { /* check it all first */
        if (range(r->element[i], asked, &rg))
            return -1;
        for (int s = rg.lo; s <= rg.hi; s++)
            if (!(seen[s / 8] & (1u << (s % 8)))) {
                seen[s / 8] |= (unsigned char)(1u << (s % 8));
                covered++;
            }
    }
    for (size_t i = 0; i < r->elements; i++) {
        int rc;
        range(r->element[i], asked, &rg);
        if ((rc = fn(&rg, arg)) != 0)
            return rc < 0 ? rc : -1;
    }
    return covered;
}

int cluster_redirect_parse(const char *err, size_t len, int *slot,
                           char *addr, size_t addrlen)
{
    char kind;
    size_t i, n;
    long v = 0;

    if (len > 6 && memcmp(err, "MOVED ", 6) == 0)
        kind = 'M', i = 6;
    else if (len > 4 && memcmp(err, "ASK ", 4) == 0)
        kind = 'A', i = 4;
    else
        return 0;
    for (n = 0; i < len && err[i] >= '0' && err[i] <= '9' && n < 6; i++, n++)
        v = v * 10 + (err[i] - '0');
    if (n == 0 || v >= CLUSTER_NSLOTS || i >= len || err[i] != ' ')
        return 0;
    i++;
    n = len - i; /* host:port to the end */
    if (n == 0 || n >= addrlen || memchr(err + i, 0, n) ||
        memchr(err + i, ' ', n) || !memchr(err + i, ':', n))
        return 0;
    memcpy(addr, err + i, n);
    addr[n] = 0;
    *slot = (int)v;
    return kind;
}
