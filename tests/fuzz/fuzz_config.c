/*
 * fuzz_config.c -- rl_config_set() with arbitrary names and values (input
 * "name\0value"), as a binding or a config file would pass them.  Accepted
 * values must be usable: a limiter opens with them unless the store or the
 * rules they name are the problem.  No limiter is opened on a remote store:
 * the fuzzer must not connect anywhere.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "options.h"

int fuzz_config(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 2);
    rl_config *cfg = rl_config_new();
    const char *name, *value;
    int rc;

    FUZZ_CHECK(buf && cfg);
    memcpy(buf, data, size);
    buf[size] = buf[size + 1] = '\0';
    name = buf;
    value = buf + strlen(buf) + 1;
    if (value > buf + size)
        value = buf + size + 1;
    rc = rl_config_set(cfg, name, value);
    FUZZ_CHECK(rc == RL_OK || rl_errmsg(NULL)[0] != '\0');
    if (rc == RL_OK && strcmp(name, "memory_max_bytes") == 0)
        FUZZ_CHECK(cfg->memory_max_bytes >= (1 << 20));
    if (rc == RL_OK && strcmp(name, "timeout_ms") == 0)
        FUZZ_CHECK(cfg->timeout_ms >= 1 && cfg->timeout_ms <= 60000);
    /* Open a limiter only on the memory store: a fuzzed redis:// URI
     * names arbitrary hosts, and a test must never reach past loopback.
     * (URIs themselves are fuzzed by fuzz_uri, which only parses.) */
    if (rc == RL_OK && (strcmp(name, "timeout_ms") == 0 ||
                        (strcmp(name, "store") == 0 &&
                         strncmp(value, "memory", 6) == 0))) {
        rl_limiter *lim = NULL;
        rc = rl_limiter_new(&lim, cfg);
        FUZZ_CHECK(rc == RL_OK ? lim != NULL : lim == NULL);
        rl_limiter_free(lim);
    }
    rl_config_free(cfg);
    free(buf);
    return 0;
}

#ifdef FUZZ_TARGET_config
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_config(data, size);
}
#endif
