# redis-up.sh -- a private, throw-away redis-server on a free loopback port,
# for the benchmark scripts (bench/*.sh, bench/peer/run.sh).  Meant
# to be sourced (`. path/to/redis-up.sh`) by a script running under set -eu:
#
#   redis_init NAME TEMPLATE
#       Makes a temporary directory, $TMPDIR/TEMPLATE (mktemp -d; TEMPLATE
#       ends in XXXXXX), as REDIS_DIR, and traps EXIT (INT and TERM exit
#       130 and 143) to stop the server, if one runs, and remove the
#       directory, whatever happens; the exit status is kept.  NAME starts
#       the messages (e.g. "run.sh").
#   redis_up TRIES PICK
#       Starts redis-server (no persistence: save "", appendonly no) bound to
#       127.0.0.1, logging to REDIS_DIR/redis.log, on the port the command
#       PICK prints, and waits up to 5 s for it to answer PING.  If it dies
#       first (the port was taken meanwhile) or does not answer, it is
#       stopped and another port tried, TRIES times in all; PICK printing
#       nothing uses a try and starts nothing.  Sets REDIS_PORT and REDIS_PID;
#       when no server came up it says so on stderr with the log's tail and
#       exits 1.
#   redis_rand_port
#       A PICK: a random port in 20000..59999 that nothing answers on
#       (nothing printed when something does: that try is spent).
#
# $REDIS_UP_ARGS, when set, is added to the server's arguments (make
# bench-module: --loadmodule ratelimit.so), $REDIS_UP_WRAP put before
# redis-server (valgrind --tool=callgrind ...), and $REDIS_UP_WAIT is the
# tenths of a second to wait for its PING (50).
# Needs redis-server and redis-cli on the PATH.

redis_init() {
	REDIS_ME=$1
	REDIS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/$2")
	REDIS_PID=
	REDIS_PORT=
	trap redis_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

redis_cleanup() {
	redis_status=$?
	if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
		# A benchmark may have left it stopped (SIGSTOP): wake it to die.
		kill -CONT "$REDIS_PID" 2>/dev/null || true
		kill "$REDIS_PID" 2>/dev/null || :
		wait "$REDIS_PID" 2>/dev/null || :
	fi
	rm -rf "$REDIS_DIR"
	exit "$redis_status"
}

redis_up() {
	REDIS_PORT=
	redis_tries=0
	while [ -z "$REDIS_PORT" ] && [ "$redis_tries" -lt "$1" ]; do
		redis_tries=$((redis_tries + 1))
		redis_p=$($2)
		if [ -z "$redis_p" ]; then
			continue
		fi
		${REDIS_UP_WRAP:-} redis-server --port "$redis_p" --bind 127.0.0.1 --protected-mode yes \
			--save "" --appendonly no --dir "$REDIS_DIR" \
			--logfile "$REDIS_DIR/redis.log" --daemonize no \
			${REDIS_UP_ARGS:-} &
		REDIS_PID=$!
		redis_i=0
		while [ "$redis_i" -lt "${REDIS_UP_WAIT:-50}" ]; do
			if ! kill -0 "$REDIS_PID" 2>/dev/null; then
				break # died, e.g. the port was taken meanwhile: try another
			fi
			if redis-cli -h 127.0.0.1 -p "$redis_p" ping 2>/dev/null | grep -q PONG; then
				REDIS_PORT=$redis_p
				break
			fi
			sleep 0.1
			redis_i=$((redis_i + 1))
		done
		if [ -z "$REDIS_PORT" ]; then
			kill "$REDIS_PID" 2>/dev/null || :
			wait "$REDIS_PID" 2>/dev/null || :
			REDIS_PID=
		fi
	done
	if [ -z "$REDIS_PORT" ]; then
		echo "$REDIS_ME: could not start redis-server" >&2
		[ -f "$REDIS_DIR/redis.log" ] && tail -n 20 "$REDIS_DIR/redis.log" >&2
		exit 1
	fi
}

redis_rand_port() {
	redis_n=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
	redis_p=$((20000 + redis_n % 40000))
	if ! redis-cli -h 127.0.0.1 -p "$redis_p" ping >/dev/null 2>&1; then
		echo "$redis_p"
	fi
}
