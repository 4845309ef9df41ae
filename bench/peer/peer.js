#!/usr/bin/env node
'use strict';
/*
 * peer.js -- the peer side of libratelimit's Redis-store benchmark:
 * rate-limiter-flexible's RateLimiterRedis on ioredis against a Redis on
 * the loopback interface (it refuses any other address, and a non-empty
 * database without --force: it FLUSHALLs it).  What it measures:
 * docs/BENCHMARKS.md, "How each bench measures" (bench/peer).  Exit
 * status: 0; 1 when a consume() failed or Redis misbehaved; 2 on bad
 * arguments.
 */

const net = require('net');
const Redis = require('ioredis');
const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');

const PREFIX = 'peer_rlf_';

/* ---- options ------------------------------------------------------------ */

const USAGE = `usage: node peer.js --port P [options]
  --host H          Redis host, loopback only (default 127.0.0.1)
  --port P          Redis port (required)
  --seconds S       length of the timed run in seconds (default 10; alias --duration)
  --keys N          distinct keys "user:<n>" in the timed run (default 1000000)
  --mem-keys M      keys consumed once for the memory figure (default 100000)
  --concurrency C   consume() calls kept in flight (default 64)
  --points P        limiter points (default 1000000000: nothing is rejected)
  --window S        limiter duration in seconds (default 3600)
  --no-prefill      do not consume every key once before the timed run
  --seed X          PRNG seed for the key sequence (default 12345)
  --json            one JSON object per line per figure
  --force           run even if the database is not empty (it is flushed!)
  --help`;

function die(msg, code = 2) {
  process.stderr.write(`peer.js: ${msg}\n`);
  process.exit(code);
}

/* One row an option: the field it sets, then [min, max] of a number (real:
 * not rounded down), or the value a switch sets (set), or neither: a string. */
const OPTS = {
  '--host': { key: 'host' },
  '--port': { key: 'port', min: 1, max: 65535 },
  '--seconds': { key: 'seconds', min: 0.1, max: 3600, real: true },
  '--duration': { key: 'seconds', min: 0.1, max: 3600, real: true },
  '--keys': { key: 'keys', min: 1, max: 1e8 },
  '--mem-keys': { key: 'memKeys', min: 1, max: 1e8 },
  '--concurrency': { key: 'concurrency', min: 1, max: 100000 },
  '--points': { key: 'points', min: 1, max: Number.MAX_SAFE_INTEGER },
  '--window': { key: 'window', min: 1, max: 1e8 },
  '--no-prefill': { key: 'prefill', set: false },
  '--seed': { key: 'seed', min: 0, max: 2 ** 32 - 1 },
  '--json': { key: 'json', set: true },
  '--force': { key: 'force', set: true },
};

function parseArgs(argv) {
  const o = { host: '127.0.0.1', port: null, seconds: 10, keys: 1000000, memKeys: 100000, concurrency: 64,
    points: 1000000000, window: 3600, prefill: true, seed: 12345, json: false, force: false };
  for (let i = 0; i < argv.length; i++) {
    const eq = argv[i].startsWith('--') ? argv[i].indexOf('=') : -1;
    const a = eq > 0 ? argv[i].slice(0, eq) : argv[i];
    const r = OPTS[a];
    if (a === '-h' || a === '--help') { process.stdout.write(USAGE + '\n'); process.exit(0); }
    if (!r) die(`unknown argument: ${argv[i]}\n${USAGE}`);
    if ('set' in r) { o[r.key] = r.set; continue; }
    const v = eq > 0 ? argv[i].slice(eq + 1) : argv[++i];
    if (!v) die(`${a} needs a value\n${USAGE}`);
    const n = Number(v);
    if (r.min !== undefined && (!Number.isFinite(n) || n < r.min || n > r.max)) die(`bad value for ${a}: ${v}`);
    o[r.key] = r.min === undefined ? v : r.real ? n : Math.floor(n);
  }
  if (o.port === null) die(`--port is required\n${USAGE}`);
  if (!isLoopback(o.host)) die(`refusing non-loopback host "${o.host}": use 127.0.0.1 or localhost`);
  return o;
}

function isLoopback(host) {
  if (host === 'localhost') return true;
  if (net.isIPv4(host)) return host.split('.')[0] === '127';
  if (net.isIPv6(host)) return host === '::1' || /^(0{0,4}:){7}0{0,3}1$/.test(host);
  return false;
}

/* ---- helpers -------------------------------------------------------------- */

/* xorshift32: a fixed, cheap key sequence (the same for every run). */
function makeRng(seed) {
  let x = (seed >>> 0) || 0x9e3779b9;
  return () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x;
  };
}

function parseInfo(text) {
  const out = {};
  for (const line of text.split(/\r?\n/)) {
    if (!line || line[0] === '#') continue;
    const i = line.indexOf(':');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/* "calls=1,usec=2,usec_per_call=2.00,..." -> { calls: 1, usec: 2, ... } */
function parseStatLine(s) {
  return Object.fromEntries(s.split(',').map((kv) => kv.split('=')).map(([k, v]) => [k, Number(v)]));
}

function serverCpu(cpu) {
  return Number(cpu.used_cpu_user) + Number(cpu.used_cpu_sys);
}

async function usedMemory(client) {
  return Number(parseInfo(await client.info('memory')).used_memory);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/* Waits until no incremental rehash is pending (serverCron finishes it
 * within a few hundred ms on an idle server), so used_memory does not count
 * a dict's old and new tables at once. */
async function settledUsedMemory(client) {
  await sleep(300);
  let prev = await usedMemory(client);
  for (let i = 0; i < 20; i++) {
    await sleep(100);
    const cur = await usedMemory(client);
    if (cur === prev) return cur;
    prev = cur;
  }
  return prev;
}

function percentile(sorted, q) {
  if (sorted.length === 0) return NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[idx];
}

/* Keeps exactly `concurrency` consume() promises outstanding until `deadline`
 * (hrtime ns, BigInt) or until `count` calls were issued.  `nextKey(i)` gives
 * the key of the i-th call.  Latencies (ns) go into `lat` when given. */
async function fixedConcurrency(limiter, concurrency, nextKey, { count = Infinity, deadline = null, lat = null }) {
  const st = { issued: 0, done: 0, rejected: 0, errors: 0, firstError: null, lat };
  let n = 0;
  async function worker() {
    for (;;) {
      if (n >= count) return;
      if (deadline !== null && process.hrtime.bigint() >= deadline) return;
      const key = nextKey(n++);
      st.issued++;
      const t0 = process.hrtime.bigint();
      try {
        await limiter.consume(key, 1);
      } catch (e) {
        if (e instanceof RateLimiterRes) st.rejected++;
        else { st.errors++; if (!st.firstError) st.firstError = e; }
      }
      const t1 = process.hrtime.bigint();
      st.done++;
      if (lat) lat.push(Number(t1 - t0));
    }
  }
  const workers = [];
  for (let i = 0; i < concurrency; i++) workers.push(worker());
  await Promise.all(workers);
  return st;
}

/* ---- the benchmark ------------------------------------------------------- */

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const figures = [];
  const fig = (name, value, unit, note) => figures.push({ name: PREFIX + name, value, unit, note });
  const info = [];

  // The library's recommended client: ioredis with the offline queue off.
  // Beyond that, only what keeps a benchmark from hanging: give up after a
  // few reconnect attempts instead of retrying forever.
  const client = new Redis({
    host: o.host,
    port: o.port,
    enableOfflineQueue: false,
    connectTimeout: 5000,
    retryStrategy: (times) => (times > 3 ? null : 200),
  });
  let connErr = null;
  client.on('error', (e) => { connErr = e; });
  try {
    await new Promise((resolve, reject) => {
      client.once('ready', resolve);
      client.once('end', () => reject(connErr || new Error('connection closed')));
    });
  } catch (e) {
    client.disconnect();
    die(`cannot connect to Redis at ${o.host}:${o.port}: ${e.message}`, 1);
  }

  const server = parseInfo(await client.info('server'));
  info.push(['redis_version', server.redis_version]);
  info.push(['ioredis', require('ioredis/package.json').version]);
  info.push(['rate-limiter-flexible', require('rate-limiter-flexible/package.json').version]);
  info.push(['node', process.version]);

  const dbsize0 = await client.dbsize();
  if (dbsize0 > 0 && !o.force) {
    await client.quit();
    die(`database at ${o.host}:${o.port} holds ${dbsize0} keys and would be flushed; use --force`, 2);
  }

  const limiter = new RateLimiterRedis({
    storeClient: client,
    points: o.points,
    duration: o.window,
    // keyPrefix left at its default, 'rlflx': keys are "rlflx:user:<n>".
  });
  info.push(['limiter', `RateLimiterRedis points=${o.points} duration=${o.window}s keyPrefix=${limiter.keyPrefix}`]);

  const keys = new Array(o.keys);
  for (let i = 0; i < o.keys; i++) keys[i] = 'user:' + i;

  let failed = false;
  const checkErrors = (phase, st) => {
    if (st.errors > 0) {
      failed = true;
      process.stderr.write(`peer.js: ${phase}: ${st.errors} consume() errors, first: ${st.firstError && st.firstError.message}\n`);
    }
  };

  try {
    await client.flushall();

    // --- prefill: every key consumed once, so timed calls update counters.
    if (o.prefill) {
      const m0 = await settledUsedMemory(client);
      const t0 = process.hrtime.bigint();
      const st = await fixedConcurrency(limiter, o.concurrency, (i) => keys[i], { count: o.keys });
      const secs = Number(process.hrtime.bigint() - t0) / 1e9;
      checkErrors('prefill', st);
      const m1 = await settledUsedMemory(client);
      const dbsize = await client.dbsize();
      info.push(['prefill', `${st.done} consume() in ${secs.toFixed(1)} s, dbsize ${dbsize}`]);
      fig('prefill_bytes_per_key', round((m1 - m0) / o.keys, 1), 'B',
        `used_memory delta / ${o.keys} keys after prefill`);
      if (dbsize !== o.keys) { failed = true; process.stderr.write(`peer.js: dbsize ${dbsize} after prefill, expected ${o.keys}\n`); }
    }

    // --- timed run -----------------------------------------------------------
    const rng = makeRng(o.seed);
    const seq = new Uint32Array(1 << 20); // key indices fixed before timing
    for (let i = 0; i < seq.length; i++) seq[i] = rng() % o.keys;
    const mask = seq.length - 1;
    const lat = [];

    await client.config('RESETSTAT');
    const srvCpu0 = serverCpu(parseInfo(await client.info('cpu')));
    const cpu0 = process.cpuUsage();
    const start = process.hrtime.bigint();
    const deadline = start + BigInt(Math.round(o.seconds * 1e9));
    const st = await fixedConcurrency(limiter, o.concurrency, (i) => keys[seq[i & mask]], { deadline, lat });
    const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    const cpu1 = process.cpuUsage(cpu0);
    const cmdstats = parseInfo(await client.info('commandstats'));
    const srvCpu1 = serverCpu(parseInfo(await client.info('cpu')));
    checkErrors('timed run', st);

    const sorted = Float64Array.from(lat).sort();
    fig('checks_per_s', Math.round(st.done / elapsed), 'checks/s',
      `${st.done} consume() in ${elapsed.toFixed(2)} s, ${o.concurrency} in flight`);
    fig('p50_us', round(percentile(sorted, 0.5) / 1e3, 1), 'us', 'consume() latency');
    fig('p99_us', round(percentile(sorted, 0.99) / 1e3, 1), 'us', 'consume() latency');
    fig('max_us', round(sorted.length ? sorted[sorted.length - 1] / 1e3 : NaN, 1), 'us', 'consume() latency');
    fig('client_cpu_share', round((cpu1.user + cpu1.system) / 1e6 / elapsed, 2), 'cores',
      'CPU time of this node process / wall time of the timed run');
    fig('server_cpu_share', round((srvCpu1 - srvCpu0) / elapsed, 2), 'cores',
      'redis-server CPU time (INFO cpu, all threads) / wall time of the timed run');
    fig('rejected', st.rejected, 'count', 'consume() rejected (RateLimiterRes)');
    fig('errors', st.errors, 'count', 'consume() failed with an error');

    // Every EVAL/EVALSHA line, and their pooled mean.
    let calls = 0, usec = 0;
    const scriptLines = [];
    for (const [k, v] of Object.entries(cmdstats)) {
      if (!/^cmdstat_(evalsha|eval|evalsha_ro|eval_ro|fcall|fcall_ro)$/.test(k)) continue;
      const s = parseStatLine(v);
      scriptLines.push(`${k}:${v}`);
      const cmd = k.slice('cmdstat_'.length);
      fig(`${cmd}_calls`, s.calls, 'count', `INFO commandstats ${k}`);
      fig(`${cmd}_usec_per_call`, round(s.calls ? s.usec / s.calls : NaN, 3), 'us', `INFO commandstats ${k} usec_per_call=${s.usec_per_call}`);
      calls += s.calls;
      usec += s.usec;
    }
    fig('usec_per_call', round(calls ? usec / calls : NaN, 3), 'us',
      `server time per script call: sum(usec)/sum(calls) over ${scriptLines.length} eval* line(s)`);
    if (calls === 0) { failed = true; process.stderr.write('peer.js: no EVAL/EVALSHA in INFO commandstats\n'); }
    // The commands the script runs, as Redis 7 counts them too.
    const innerLines = Object.entries(cmdstats)
      .filter(([k]) => !/^cmdstat_(evalsha|eval|info|dbsize|flushall|hello|select|ping|config(\|.*)?|client(\|.*)?)$/.test(k))
      .map(([k, v]) => `${k}:${v}`);

    // --- memory per key ----------------------------------------------------------
    await client.flushall();
    const m0 = await settledUsedMemory(client);
    const mst = await fixedConcurrency(limiter, o.concurrency, (i) => 'user:' + i, { count: o.memKeys });
    checkErrors('memory run', mst);
    const m1 = await settledUsedMemory(client);
    const mdb = await client.dbsize();
    if (mdb !== o.memKeys) { failed = true; process.stderr.write(`peer.js: dbsize ${mdb} after memory run, expected ${o.memKeys}\n`); }
    fig('bytes_per_key', round((m1 - m0) / o.memKeys, 1), 'B',
      `used_memory delta / ${o.memKeys} keys, each consumed once after FLUSHALL`);
    const sampleKey = limiter.getKey('user:' + (o.memKeys - 1)); // the last, longest key
    const sampleBytes = await client.memory('USAGE', sampleKey, 'SAMPLES', '0');
    fig('memory_usage_sample_bytes', sampleBytes, 'B', `MEMORY USAGE ${sampleKey}`);
    const enc = await client.object('ENCODING', sampleKey);
    const val = await client.get(sampleKey);
    const ttl = await client.pttl(sampleKey);
    info.push(['sample key', `${sampleKey} = "${val}" (string, encoding ${enc}, pttl ${ttl} ms)`]);
    await client.flushall();

    output(o, info, figures, scriptLines, innerLines);
  } catch (e) {
    failed = true;
    process.stderr.write(`peer.js: ${e && e.stack ? e.stack : e}\n`);
  } finally {
    try { await client.quit(); } catch (e) { client.disconnect(); }
  }
  process.exitCode = failed ? 1 : 0;
}

function round(v, d) {
  if (!Number.isFinite(v)) return null;
  const f = 10 ** d;
  return Math.round(v * f) / f;
}

function output(o, info, figures, scriptLines, innerLines) {
  if (o.json) {
    for (const f of figures) {
      process.stdout.write(JSON.stringify({ name: f.name, value: f.value, unit: f.unit }) + '\n');
    }
    return;
  }
  const lines = [];
  lines.push('rate-limiter-flexible peer benchmark');
  for (const [k, v] of info) lines.push(`  ${k.padEnd(22)} ${v}`);
  lines.push(`  ${'run'.padEnd(22)} ${o.seconds} s, ${o.concurrency} in flight, ${o.keys} keys, ${o.memKeys} memory keys, host ${o.host}:${o.port}`);
  lines.push('');
  const w = Math.max(...figures.map((f) => f.name.length));
  const vs = figures.map((f) => (f.value === null ? 'n/a' : String(f.value)));
  const vw = Math.max(...vs.map((s) => s.length));
  lines.push(`  ${'figure'.padEnd(w)}  ${'value'.padStart(vw)}  unit      note`);
  figures.forEach((f, i) => {
    lines.push(`  ${f.name.padEnd(w)}  ${vs[i].padStart(vw)}  ${f.unit.padEnd(8)}  ${f.note || ''}`);
  });
  lines.push('');
  lines.push('  INFO commandstats, script lines:');
  for (const l of scriptLines) lines.push(`    ${l}`);
  lines.push('  INFO commandstats, other lines (Redis 7 counts the calls made inside scripts):');
  for (const l of innerLines) lines.push(`    ${l}`);
  process.stdout.write(lines.join('\n') + '\n');
}

main().catch((e) => {
  process.stderr.write(`peer.js: ${e && e.stack ? e.stack : e}\n`);
  process.exitCode = 1;
});
