/*
 * crc16.h -- Redis Cluster's key slot: CRC16-CCITT (XMODEM) of the key's
 * hash tag, modulo 16384.  Keys of one client share the tag {<client key>},
 * so all their rules land in one slot and can run in one script.
 */
#ifndef RL_CRC16_H
#define RL_CRC16_H

#include <stddef.h>
#include <stdint.h>

uint16_t crc16(const char *buf, size_t len);

/* The cluster slot of a key, honouring {hash tags} as Redis does. */
unsigned key_slot(const char *key, size_t len);

#endif
