/*
 * demo.h -- what the demo's files share: the live part (demo_live.c).
 */
#ifndef RL_DEMO_H
#define RL_DEMO_H

/* N gateway processes with rules from the store's Redis, SECONDS long,
 * a table line a second; 0 on success. */
int live(int n, int seconds, const char *store);

#endif
