/*
 * rules_source.h -- the option rules_source: a background thread per
 * limiter that follows a rule set kept elsewhere (a snapshot key in
 * Redis, with pushes on a channel of the same name and a timed pull; or
 * a file, watched), and swaps each new valid set in.
 */
#ifndef RL_RULES_SOURCE_H
#define RL_RULES_SOURCE_H

#include "ratelimit.h"

struct rl_config;

/*
 * Start lim's rules source as cfg says (cfg->rules_source is set), from
 * rl_limiter_new(): read the source once (within connect_timeout_ms); if
 * it cannot be read, start from rules_file (the last good copy) or, with
 * degraded_start, from no rules; then let the thread follow the source.
 * Returns RL_OK, or RL_EOPTION / RL_ESTORE / RL_ENOMEM with a message
 * recorded for rl_errmsg(NULL).  On failure lim->source may be set:
 * rules_source_stop() (from rl_limiter_free()) releases it.
 */
int rules_source_start(rl_limiter *lim, const struct rl_config *cfg);

/* Stop the thread (promptly, whatever it waits on), free the source.
 * No-op without one. */
void rules_source_stop(rl_limiter *lim);

#endif
