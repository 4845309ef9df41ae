/*
 * run.c -- the fuzz targets without libFuzzer, for `make check`: every file
 * of tests/fuzz/corpus/<target>/, then deterministic mutations of each
 * (byte flips, truncations, splices), so the targets keep compiling and
 * the corpus keeps passing on machines without clang.
 *
 *   fuzz_run CORPUS_DIR [MUTATIONS_PER_FILE]
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static const struct {
    const char *name;
    int (*fn)(const uint8_t *, size_t);
} targets[] = {{"rules", fuzz_rules}, {"config", fuzz_config},
               {"pattern", fuzz_pattern}, {"uri", fuzz_uri},
               {"cluster", fuzz_cluster}, {"dryrun", fuzz_dryrun},
               {"rulebody", fuzz_rulebody}, {"ruleid", fuzz_ruleid},
               {"ruleset_delta", fuzz_ruleset_delta},
               {"script", fuzz_script}, {"globindex", fuzz_globindex}};

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void mutate(uint8_t *buf, size_t *len, size_t cap)
{
    static const char tokens[] = "{}[]\":,*?/\n\0-9e";
    switch (next() % 4) {
    case 0: /* flip a byte */
        if (*len)
            buf[next() % *len] ^= (uint8_t)(1u << (next() % 8));
        break;
    case 1: /* truncate */
        if (*len)
            *len = next() % *len;
        break;
    case 2: /* insert a token byte */
        if (*len < cap) {
            size_t at = *len ? next() % *len : 0;
            memmove(buf + at + 1, buf + at, *len - at);
            buf[at] = (uint8_t)tokens[next() % (sizeof tokens - 1)];
            (*len)++;
        }
        break;
    default: /* overwrite with a random byte */
        if (*len)
            buf[next() % *len] = (uint8_t)next();
    }
}

static int run_file(int t, const char *path, int mutations)
{
    uint8_t buf[1 << 16], work[1 << 16];
    FILE *f = fopen(path, "rb");
    size_t len, wlen;

    if (!f)
        return -1;
    len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    targets[t].fn(buf, len);
    for (int m = 0; m < mutations; m++) {
        memcpy(work, buf, len);
        wlen = len;
        for (int k = 1 + (int)(next() % 4); k > 0; k--)
            mutate(work, &wlen, sizeof work);
        targets[t].fn(work, wlen);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int mutations = argc > 2 ? atoi(argv[2]) : 200, files = 0;
    char path[4096];

    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_run CORPUS_DIR [MUTATIONS]\n");
        return 2;
    }
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        DIR *d;
        struct dirent *e;
        int n = 0;

        snprintf(path, sizeof path, "%s/%s", argv[1], targets[t].name);
        if (!(d = opendir(path))) {
            fprintf(stderr, "fuzz_run: no corpus at %s\n", path);
            return 1;
        }
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s/%s", argv[1],
                     targets[t].name, e->d_name);
            if (run_file((int)t, path, mutations) == 0)
                n++;
        }
        closedir(d);
        printf("fuzz %s: %d corpus files x %d mutations\n", targets[t].name,
               n, mutations);
        files += n;
    }
    printf("%d passed, 0 failed\n", files);
    return files ? 0 : 1;
}
