#!/usr/bin/env python3
"""scriptprofile.py -- where the check script's Redis time goes, per key.

Method and options: docs/BENCHMARKS.md, "How each bench measures".

  python3 bench/scriptprofile.py [--json] [--calls N] [--batch N]
      [--base FILE [--base-long]] [--parts LIST] [--algos 0,1,2,3] [--long] [--rounds N]
      [--usec [--gap US]] [--twice]
"""
import argparse, json, os, random, re, shutil, socket, subprocess, sys
import tempfile, time, glob

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests'))
import nginx_harness  # noqa: E402 (free_port, wait_port)
W, BIG = 86400000, 10 ** 9

# Each part: the check.lua (lean.lua: lean_*) text it replaces with what.
LEAN_SET = "call('SET', key, '0', 'PXAT', format('%d', full))"
LEAN_CALL = 'x[1](key, x[2], x[3], x[4], x[5], x[6], x[7], x[8], now)'
PARTS = {
    'pexpiretime': [("pxt = call('PEXPIRETIME', K[key])",
                     "pxt = now + 86400000")],
    'load': [("a, b, c = load[algo](burst, w, p, q, value, pxt)",
              "a, b, c = 0, 0, 0")],
    'save': [("local value, exp = save[algo](burst, w, p, q, a, b, c)",
              "local value, exp = '5', now + 100000")],
    'set': [("call('SET', K[key], value, 'PXAT', last_pxat)", ""),
            ("type(redis.pcall('INCRBY', K[key], cost)) == 'number'",
             "true")],
    'algorithm': [("ok, changed, remaining, reset, retry, a, b, c =\n"
                   "          apply[algo](limit, burst, w, p, q, a, b, c, "
                   "now, cost)",
                   "ok, changed, remaining, reset, retry, b = "
                   "true, true, 1, 2, 0, b + 1")],
    'out': [("out[n + 1], out[n + 2], out[n + 3] = "
             "ok == true and 1 or ok or -retry, remaining, reset", ""),
            ("-- one chunk (most calls) makes no table of parts.",
             "n = 0")],
    # the lean token bucket's (q = 1) parts, run as lean calls: its write
    # (SET "0" PXAT; lean_value: PEXPIREAT alone, which would leave a
    # value an earlier version reads as a level held), the answer's pack
    'lean_value': [(LEAN_SET, "call('PEXPIREAT', key, format('%d', full))")],
    'lean_answer': [("return struct.pack('<dddd', " + LEAN_CALL + ")",
                     LEAN_CALL + " return '" + '.' * 32 + "'")],
}

# rate-limiter-flexible 11.4.0's RateLimiterRedis script (bench/peer/README.md)
PEER = """redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX')
local consumed = redis.call('incrby', KEYS[1], ARGV[1])
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 then
  redis.call('expire', KEYS[1], ARGV[2])
  ttl = 1000 * ARGV[2]
end
return {consumed, ttl}
"""

FLOOR = """local t = redis.call('TIME')
local exp = string.format('%d', t[1] * 1000 + 60000)
local v = redis.call('MGET', unpack(KEYS))
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], string.format('%d', (tonumber(v[i]) or 0) + 1),
             'PXAT', exp)
end
return #KEYS
"""


def c_string(path):
    """The Lua text of a lua/embed.sh output file."""
    out = []
    for line in open(path):
        m = re.match(r'^    "(.*)\\n"$', line.rstrip('\n'))
        if m:
            out.append(m.group(1).replace('\\"', '"').replace('\\\\', '\\'))
    return '\n'.join(out) + '\n'


class Redis:
    def __init__(self, port):
        self.s = socket.create_connection(('127.0.0.1', port))
        self.f = self.s.makefile('rb')

    def send(self, *args):
        out = [b'*%d\r\n' % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b'$%d\r\n%s\r\n' % (len(a), a))
        self.s.sendall(b''.join(out))

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b'-':
            raise RuntimeError(rest.decode())
        if t in (b'+', b':'):
            return rest.decode() if t == b'+' else int(rest)
        if t == b'$':
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2].decode("latin-1")
        if t == b'*':
            return [self.read() for _ in range(int(rest))]
        raise RuntimeError('bad reply %r' % line)

    def cmd(self, *args):
        self.send(*args)
        return self.read()


def rule(algo):
    if algo in (0, 2):  # windows: a huge limit, every check allowed
        return [algo, BIG, 0, W, W // 1000000, BIG // 1000000, 0]
    # buckets: a slow refill, so that a charged key lives on
    return [algo, 1000, BIG, W, W // 1000, 1, 0]


def fcall(fn, algo, keys, long_form):
    r = rule(algo)
    argv = ['0', 'c', 4 + len(r)] + r + [len(keys)]
    for _ in keys:
        argv += [1, 4, 1, 0, ''] if long_form else [-1, 4, 1]
    return (['FCALL', fn, len(keys)] +
            ['rl:{user:%d}:p:%d' % (k, algo) for k in keys] + argv)


def lean_call(fn, algo, key, tail=''):
    """The lean function's call (lua/lean.lua) for one key, cost 1; tail
    ':1': option redis_oldest_limiter=1.1 (rows lean_11, lean_batch_11)."""
    return ['FCALL', fn + '_l', 1, 'rl:{user:%d}:p:%d' % (key, algo),
            ':'.join(str(v) for v in rule(algo)[:6] + [1]) + tail]


def lean_batch(fn, algo, keys, tail=''):
    """The lean batch's call (lua/lean.lua): the keys, an argument each."""
    arg = ':'.join(str(v) for v in rule(algo)[:6] + [1]) + tail
    return (['FCALL', fn + '_b', len(keys)] +
            ['rl:{user:%d}:p:%d' % (k, algo) for k in keys] + [arg] * len(keys))


def peer_call(sha, key):
    return ['EVALSHA', sha, 1, 'rlflx:user:%d' % key, 1, 3600, BIG, 3600]


def floor_call(sha, keys, extra):
    return (['EVALSHA', sha, len(keys)] + ['fl:%d' % k for k in keys] +
            ['x'] * (extra * len(keys)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--json', action='store_true')
    ap.add_argument('--calls', type=int, default=100)
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--keys', type=int, default=3000)
    ap.add_argument('--algos', default='0,1,2,3')
    ap.add_argument('--parts', default=','.join(PARTS))
    ap.add_argument('--base')
    ap.add_argument('--long', action='store_true')
    ap.add_argument('--base-long', action='store_true')
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--twice', action='store_true')
    ap.add_argument('--usec', action='store_true')
    ap.add_argument('--gap', type=float, default=0)
    ap.add_argument('--library', default=os.path.join(
        HERE, '..', 'gen', 'lua_library.c'))
    o = ap.parse_args()
    if not shutil.which('valgrind') or not shutil.which('redis-server'):
        sys.exit('scriptprofile.py: needs valgrind and redis-server')
    lib = c_string(o.library)
    libs = {'library': lib}
    if o.base:
        libs['base'] = c_string(o.base)
    for p in [x for x in o.parts.split(',') if x]:
        text = lib
        for a, b in PARTS[p]:
            if a not in text:
                sys.exit('scriptprofile.py: part %s: text not found' % p)
            text = text.replace(a, b)
        libs['no_' + p] = text

    tmp = tempfile.mkdtemp(prefix='scriptprofile.')
    port = nginx_harness.free_port()
    grind = [] if o.usec else ['valgrind', '--tool=callgrind',
                               '--callgrind-out-file=%s/cg.%%p' % tmp]
    srv = subprocess.Popen(
        grind + ['redis-server',
         '--port', str(port), '--bind', '127.0.0.1', '--save', '',
         '--appendonly', 'no', '--dir', tmp],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    nginx_harness.START_TIMEOUT_S = 30  # valgrind's start
    try:
        nginx_harness.wait_port(port, srv, 'scriptprofile.py: redis-server')
        r = Redis(port)
        (usec if o.usec else run)(o, r, srv.pid, tmp, libs)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def instructions(pid, tmp):
    """The server's instructions since the last zeroing."""
    subprocess.run(['callgrind_control', '-d', str(pid)],
                   capture_output=True, check=True)
    total = 0
    for f in glob.glob('%s/cg.%d.*' % (tmp, pid)):
        for line in open(f):
            if line.startswith(('totals:', 'summary:')):
                total = int(line.split()[1])
        os.remove(f)
    return total


def measure(o, r, pid, tmp, calls, per=None):
    """The server's instructions per key: `per` keys a call (o.batch)."""
    subprocess.run(['callgrind_control', '-z', str(pid)],
                   capture_output=True, check=True)
    for c in calls:
        r.send(*c)
    for c in calls:
        r.read()
    return instructions(pid, tmp) / (len(calls) * (per or o.batch))


def run(o, r, pid, tmp, libs):
    for name, text in libs.items():
        r.cmd('FUNCTION', 'LOAD', 'REPLACE',
              "#!lua name=sp_%s\nlocal RL_FUNCTION = 'sp_%s'\n%s" %
              (name, name, text))
    sha = r.cmd('SCRIPT', 'LOAD', FLOOR)
    peer = r.cmd('SCRIPT', 'LOAD', PEER)
    lean = [] if 'lean_check' not in libs['library'] else \
        ['lean'] if o.batch == 1 else \
        ['lean_batch'] if 'lean_batch' in libs['library'] else []
    if "[':1']" in libs['library']:  # redis_oldest_limiter=1.1, same keys
        lean += [n + '_11' for n in lean]
    # a lean part leaves states the others would misread: keys of its own
    spaces = [n for n in libs if n.startswith('no_lean')]
    for algo in [int(a) for a in o.algos.split(',')]:
        r.cmd('FLUSHALL')
        for i in range(0, o.keys * (1 + len(spaces)), 100):  # every key exists
            r.cmd(*fcall('sp_library', algo, range(i, i + 100), o.long))
            if i >= o.keys:
                continue
            r.cmd(*floor_call(sha, range(i, i + 100), 0))
            for k in range(i, i + 100):
                r.send(*peer_call(peer, k))
            for k in range(i, i + 100):
                r.read()
        got = {}
        for _ in range(o.rounds):  # alternated; each name's least kept
            for name in list(libs) + lean + ['peer', 'floor', 'floor_5_argv']:
                rng = random.Random(11)  # the same keys for each
                n = o.calls * o.batch  # each key once a name when it can
                ks = rng.sample(range(o.keys), n) if n <= o.keys else None
                picks = [ks[i:i + o.batch] if ks else
                         rng.sample(range(o.keys), o.batch)
                         for i in range(0, n, o.batch)]
                if o.twice:  # each batch names half its keys, twice
                    picks = [p[:o.batch // 2] * 2 for p in picks]
                lp = name.startswith('no_lean')  # a lean part: lean calls
                if lp:
                    off = o.keys * (1 + spaces.index(name))
                    picks = [[k + off for k in p] for p in picks]
                fn = 'sp_' + (name if lp else 'library')
                tail = ':1' if name.endswith('_11') else ''
                one = name in ('lean', 'lean_11', 'peer') or (lp and o.batch == 1)
                if one:  # one key a call
                    keys = [k for p in picks for k in p]
                    v = measure(o, r, pid, tmp,
                                [peer_call(peer, k) if name == 'peer'
                                 else lean_call(fn, algo, k, tail)
                                 for k in keys], 1)
                elif name.startswith('lean_batch') or lp:
                    calls = [lean_batch(fn, algo, k, tail) for k in picks]
                elif name.startswith('floor'):
                    extra = 5 if name == 'floor_5_argv' else 0
                    calls = [floor_call(sha, k, extra) for k in picks]
                else:
                    calls = [fcall('sp_' + name, algo, k,
                                   o.long or (name == 'base' and o.base_long))
                             for k in picks]
                if not one:
                    v = measure(o, r, pid, tmp, calls)
                got[name] = min(got.get(name, v), v)
        report(o, algo, got)


def usec(o, r, pid, tmp, libs):
    """--usec: commandstats' us per check of the lean path (one call at a
    time, or --batch N > 1 pipelined lean batches) and of the peer's script
    (one call at a time), in blocks of --calls checks alternated --rounds
    times (each block's order turned), --gap us between calls; medians."""
    r.cmd('FUNCTION', 'LOAD', 'REPLACE', "#!lua name=sp_library\n"
          "local RL_FUNCTION = 'sp_library'\n%s" % libs['library'])
    peer = r.cmd('SCRIPT', 'LOAD', PEER)
    med = lambda v: sorted(v)[len(v) // 2]
    for algo in [int(a) for a in o.algos.split(',')]:
        r.cmd('FLUSHALL')
        for i in range(0, o.keys, 100):
            r.cmd(*fcall('sp_library', algo, range(i, i + 100), False))
            for k in range(i, i + 100):
                r.cmd(*peer_call(peer, k))
        got = {'lean': [], 'peer': []}
        for n in range(o.rounds):
            rng = random.Random(n)
            keys = [rng.randrange(o.keys) for _ in range(o.calls)]
            for name in (['lean', 'peer'], ['peer', 'lean'])[n % 2]:
                r.cmd('CONFIG', 'RESETSTAT')
                b = o.batch if name == 'lean' else 1
                for i in range(0, len(keys), b):
                    r.cmd(*(peer_call(peer, keys[i]) if name == 'peer' else
                            lean_call('sp_library', algo, keys[i]) if b == 1
                            else lean_batch('sp_library', algo, keys[i:i + b])))
                    if o.gap:
                        time.sleep(o.gap / 1e6)
                line = [x for x in r.cmd('INFO', 'commandstats').split('\r\n')
                        if x.startswith('cmdstat_%s:' % ('evalsha' if name == 'peer' else 'fcall'))][0]
                got[name].append(float(line.split('usec_per_call=')[1].split(',')[0]) / b)
        ratios = [a / b for a, b in zip(got['lean'], got['peer'])]
        print('algorithm %d: lean %.2f us per check (batches of %d), peer %.2f us, '
              '%.2fx peer (median of %d; %.2f-%.2f), gap %g us'
              % (algo, med(got['lean']), o.batch, med(got['peer']), med(ratios),
                 o.rounds, min(ratios), max(ratios), o.gap))


def report(o, algo, got):
    lib = got['library']
    if o.json:
        print(json.dumps({'name': 'script_instructions_per_key_%d' % algo,
                          'value': round(lib), 'unit': 'instructions',
                          'batch': o.batch, 'calls': o.calls,
                          'long_form': o.long,
                          'x_peer': round(lib / got['peer'], 3),
                          'refs': {k: round(v) for k, v in got.items()
                                   if k != 'library'}}))
        return
    print('algorithm %d: library %.0f instructions per key (batches of %d)'
          ', %.2fx peer' % (algo, lib, o.batch, lib / got['peer']))
    for k, v in got.items():
        if k != 'library':
            print('  %-16s %8.0f  (%+.0f)  %.2fx peer'
                  % (k, v, v - lib, v / got['peer']))


if __name__ == '__main__':
    main()
