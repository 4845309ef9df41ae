/*
 * fuzz_resp.h -- the frame of the fuzz targets whose input is Redis's
 * answer (fuzz_cluster.c, fuzz_script.c): the bytes go through hiredis's
 * own reader, as they would off a socket, and each reply it makes of them
 * is handed to the target's parser under test, then freed.  Inputs that
 * announce a huge element are skipped (fuzz_resp_huge, fuzz.h).
 */
#ifndef RL_FUZZ_RESP_H
#define RL_FUZZ_RESP_H

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"

/* Feed data[0..size) to a reader and call each(reply, arg) for every reply
 * it yields (each one freed after). */
static inline void fuzz_resp_each(const uint8_t *data, size_t size,
                                  void (*each)(const redisReply *, void *),
                                  void *arg)
{
    redisReader *rd;
    void *reply = NULL;

    if (fuzz_resp_huge(data, size))
        return;
    rd = redisReaderCreate();
    FUZZ_CHECK(rd != NULL);
    if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK) {
        while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply) {
            each(reply, arg);
            freeReplyObject(reply);
            reply = NULL;
        }
    }
    redisReaderFree(rd);
}

#endif
