/*
 * slots_settle.c -- see slots_settle.h: a settle's op on the table the
 * memory and shared-memory stores keep, written once for both.
 */
#include "slots_settle.h"

int slots_settle_op(const slots_settle_io *io, const store_settle *ss,
                    size_t i, uint64_t kh, int64_t now, uint32_t now_s)
{
    const store_op *op = &ss->ops[i];
    int64_t until = settle_until(&op->rule->ap, ss->at_ms), exp;
    uint64_t mfp = slots_fingerprint(settle_marker_seed(ss->op_id[i], ss->id),
                                     kh);
    uint64_t fp = slots_fingerprint(op->rule->shape.state_seed, kh);
    algo_state st = {0};
    uint32_t keep = 0;
    slot_entry *e;

    if (now > until || io->find(io->arg, mfp, now_s))
        return 0;
    io->put(io->arg, mfp, &st, until, 0, now_s);
    if ((e = io->find(io->arg, fp, now_s))) {
        st = (algo_state){.a = e->a, .b = e->b, .c = e->c};
        keep = e->expires; /* a refund never shortens a state's life */
    }
    if (settle_state(&op->rule->ap, ss->debt, op->cost, ss->at_ms, now, &st,
                     e != NULL, &exp))
        io->put(io->arg, fp, &st, exp, keep, now_s);
    return 1;
}
