/*
 * benchmodes.h -- the entries of the benches that run as modes of a
 * group's program (bench_modes_main(), benchutil.h): the memory store's,
 * rlbench dryrun|metrics|shm|log|match|reserve (match is the rules' bench, here
 * because swapbench needs libcurl and it must not), and the Redis store's,
 * redisbench async.  Each takes argv as a main does, argv[0] being the
 * mode's name.
 */
#ifndef RL_BENCH_BENCHMODES_H
#define RL_BENCH_BENCHMODES_H

int dryrun_main(int argc, char **argv);  /* dryrunbench.c  */
int metrics_main(int argc, char **argv); /* metricsbench.c */
int shm_main(int argc, char **argv);     /* shmbench.c     */
int log_main(int argc, char **argv);     /* logbench.c     */
int match_main(int argc, char **argv);   /* matchbench.c   */
int async_main(int argc, char **argv);   /* asyncbench.c   */
int reserve_main(int argc, char **argv); /* reservebench.c */
int values_main(int argc, char **argv);  /* valuesbench.c  */

#endif
