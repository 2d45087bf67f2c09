/*
 * ocivendir-client: the native thin client that kapp-controller's sidecar execs as `vendir`.
 *
 * Owns: the client side of ocivendir server protocol v1 - the mode switch (OCIVENDIR_SERVER), the socket
 * directory's resolution and checks, handing the call (argv, environment, umask, cwd, stdio and a cwd directory
 * descriptor) to a resident server's worker, relaying its exit status and the caller's SIGTERM/SIGINT/SIGHUP, the
 * detached start of a server when none runs (once for a burst: the build's start lock; in a scrubbed environment)
 * and the wait for it to listen, and the in-process fallback: execv of the build's own `ocivendir` program (argv[0]
 * kept, OCIVENDIR_SERVER=off added) whenever the server certainly did not start the call, or the call sets a variable
 * that acts when a program starts (PYTHONPATH, LD_PRELOAD, ...: server/interpreter.py's lists), which no server started
 * without it can honour; with OCIVENDIR_SERVER_LOG, why it ran in-process, in the server's log as the Python client
 * writes it.
 *
 * Needs only a C library, linked statically: musl where installed, else glibc (scripts/client.sh). Built with
 * -DOCIVENDIR_BUILD="<16 hex digits>".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef OCIVENDIR_BUILD
#error "build with -DOCIVENDIR_BUILD=\"<16 lowercase hex digits>\" (scripts/client.sh)"
#endif
_Static_assert(sizeof(OCIVENDIR_BUILD) == 17, "OCIVENDIR_BUILD must be 16 hex digits");

#define MAX_BODY (4u << 20)       /* the request body's limit (protocol) */
#define MAX_PAYLOAD (64u << 10)   /* any frame the worker sends us: larger is a protocol error */
#define REASON_MAX 512
#define START_WAIT_MS 5000 /* how long a first call waits for the server it finds starting to listen */
#define START_POLL_MS 5
#define REPLACE_WAIT_MS 1000 /* how long a caller a server made way for waits for it to let its lock go */
#define START_RETAKES 8 /* a start lock found removed after it was taken is taken again at most so often */

extern char **environ;

static const char *prog = "vendir"; /* basename(argv[0]): the name errors and debug lines carry */
static int debug;                   /* `--debug` anywhere in argv */
static char **call_argv;

static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP};
#define NFORWARDED ((int)(sizeof(forwarded) / sizeof(forwarded[0])))
static volatile sig_atomic_t pending[NFORWARDED];

/* ---- small robust I/O ---------------------------------------------------------------------------------- */

/* Writes all of buf to a socket or pipe; 0 on success, -1 with errno on error. Never raises SIGPIPE. */
static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK)
            n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads exactly len bytes: 1 done, 0 end of file first, -1 error. */
static int read_full(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            return 0;
        p += n;
        len -= (size_t)n;
    }
    return 1;
}

static uint32_t get_u32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static void say(const char *text) {
    (void)write_all(STDERR_FILENO, text, strlen(text));
}

/* ---- where the build lives ----------------------------------------------------------------------------- */

static int via_proc; /* the install directory came from /proc/self/exe */

/* dirname(realpath(own executable)) into dir (PATH_MAX); 0 on success. /proc may be absent (a chroot). */
static int install_dir(char *dir) {
    char found[PATH_MAX];
    ssize_t n = -1;
#ifndef OCIVENDIR_TEST_NO_PROC
    n = readlink("/proc/self/exe", found, sizeof(found) - 1);
#endif
    via_proc = n > 0;
    if (n > 0) {
        found[n] = '\0';
        if (!realpath(found, dir))
            return -1;
    } else {
        const char *name = call_argv[0];
        if (!name || !*name)
            return -1;
        if (strchr(name, '/')) {
            if (!realpath(name, dir))
                return -1;
        } else {
            const char *path = getenv("PATH");
            int ok = 0;
            while (path && !ok) {
                const char *end = strchrnul(path, ':');
                size_t len = (size_t)(end - path);
                struct stat st;
                int w = len ? snprintf(found, sizeof(found), "%.*s/%s", (int)len, path, name)
                            : snprintf(found, sizeof(found), "./%s", name);
                if (w > 0 && (size_t)w < sizeof(found) && stat(found, &st) == 0 && S_ISREG(st.st_mode) &&
                    access(found, X_OK) == 0 && realpath(found, dir))
                    ok = 1;
                path = *end ? end + 1 : NULL;
            }
            if (!ok)
                return -1;
        }
    }
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    *slash = '\0'; /* "" for the root directory: paths below are made as dir + "/name" */
    return 0;
}

/* "<install dir>/<name>" into path (PATH_MAX), or exits with a vendir-style error. */
static void program_path(char *path, const char *name) {
    char dir[PATH_MAX];
    if (install_dir(dir) != 0 || snprintf(path, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX) {
        fprintf(stderr, "%s: Error: ocivendir client: cannot find its own install directory\n", prog);
        exit(1);
    }
}

/* ---- in-process run and detached server start ------------------------------------------------------------ */

/* ---- the server log (OCIVENDIR_SERVER_LOG, cli/ocivendir/server/log.py) -------------------------------------- */

#define LOG_MAX_BYTES (8L << 20) /* a log this size is renamed `<path>.1` and a new one begun */
#define LOG_FLAGS (O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
#define LOG_ROTATE_TRIES 10 /* 5 ms apart: how long a writer waits for another writer's rotation (log.py's 50 ms) */

/* The log opened for appending, or -1 unless it is a regular file of this user: never waited on (a FIFO is refused),
 * never through a symbolic link, never a file another user made at the path first. */
static int open_log(const char *path) {
    int fd = open(path, LOG_FLAGS, 0600);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The full log open on fd becomes `<path>.1`, under an exclusive lock of it and only while it is still the file at
 * path (of the processes that found it full at once, one renames it); the log at path now, or -1. The lock is only
 * tried, for at most LOG_ROTATE_TRIES * 5 ms: anyone who can read the file can hold it. fd is closed. */
static int rotate_log(const char *path, int fd) {
    const struct timespec step = {.tv_sec = 0, .tv_nsec = 5000000L};
    int locked = 0;
    for (int try = 0; try < LOG_ROTATE_TRIES && !(locked = flock(fd, LOCK_EX | LOCK_NB) == 0); try++)
        nanosleep(&step, NULL);
    char older[PATH_MAX];
    struct stat held, now;
    if (locked && fstat(fd, &held) == 0 && lstat(path, &now) == 0 && held.st_dev == now.st_dev &&
        held.st_ino == now.st_ino && held.st_size >= LOG_MAX_BYTES &&
        snprintf(older, sizeof(older), "%s.1", path) < (int)sizeof(older))
        (void)rename(path, older);
    close(fd); /* the lock goes with it */
    return open_log(path);
}

/* Appends why this call runs in-process to the server log, as the Python client does (cli/ocivendir/server/log.py):
 * one line, one write, stamped with the UTC time and the pid, every control character a space; a relative path, a
 * full log that cannot be set aside, or any failure drops it. */
static void log_fallback(const char *reason) {
    const char *path = getenv("OCIVENDIR_SERVER_LOG");
    if (!path || path[0] != '/')
        return;
    struct timespec now;
    struct tm utc;
    char stamp[32];
    if (clock_gettime(CLOCK_REALTIME, &now) != 0 || !gmtime_r(&now.tv_sec, &utc) ||
        strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &utc) == 0)
        return;
    const char *name = strcmp(prog, "vendir") == 0 || strcmp(prog, "imgpkg") == 0 ? prog : "ocivendir";
    char line[REASON_MAX + 256];
    int n = snprintf(line, sizeof(line), "%s.%03ldZ %ld client: runs %s in-process: %s", stamp,
                     (long)(now.tv_nsec / 1000000), (long)getpid(), name, reason);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof(line) - 1 ? (size_t)n : sizeof(line) - 1; /* what snprintf kept */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
            line[i] = ' ';
    line[len++] = '\n'; /* over the terminating NUL: the line is written by length */
    int fd = open_log(path);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size >= LOG_MAX_BYTES) {
        fd = rotate_log(path, fd);
        if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_size >= LOG_MAX_BYTES)) { /* not set aside: dropped */
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0) {
        (void)!write(fd, line, len);
        close(fd);
    }
}

/* Runs the call in-process: the build's ocivendir program with the caller's argv (argv[0] unchanged). */
static _Noreturn void run_in_process(const char *reason, int set_off) {
    char path[PATH_MAX];
    if (reason)
        log_fallback(reason);
    if (debug && reason) {
        char line[REASON_MAX + 256];
        snprintf(line, sizeof(line), "%s: debug: ocivendir server unavailable (%s); running in-process\n", prog,
                 reason);
        say(line);
    }
    program_path(path, "ocivendir");
    if (!via_proc) {
        /* Without /proc, PyInstaller's bootloader finds its own executable through argv[0], which names this client:
         * argv[0] becomes a path that resolves to the program and keeps the name's mode (the build's
         * modes/vendir and modes/imgpkg link to ../ocivendir), or the program's own path for any other name. */
        static char alias[PATH_MAX];
        char name[NAME_MAX + 8];
        struct stat st;
        snprintf(name, sizeof(name), "modes/%s", prog);
        program_path(alias, name);
        call_argv[0] = *prog && strchr(prog, '.') == NULL && lstat(alias, &st) == 0 ? alias : path;
    }
    if (set_off && setenv("OCIVENDIR_SERVER", "off", 1) != 0) {
        fprintf(stderr, "%s: Error: ocivendir client: %s\n", prog, strerror(errno));
        exit(1);
    }
    execv(path, call_argv);
    fprintf(stderr, "%s: Error: ocivendir client: cannot run %s: %s\n", prog, path, strerror(errno));
    exit(1);
}

/* Closes every descriptor from `first` up: close_range where the kernel has it, else a loop up to RLIMIT_NOFILE. */
static void close_from(int first) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, ~0u, 0u) == 0)
        return;
#endif
    struct rlimit rl;
    long top = 1L << 20;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)top)
        top = (long)rl.rlim_cur;
    for (long fd = first; fd < top; fd++)
        (void)close((int)fd);
}

/* What a server starts with (server/interpreter.py): its place and settings, PATH, HOME and the locale; never the
 * suite's hook switch, which only a server started by hand takes (TEST_HOOKS). */
static int kept_for_server(const char *entry) {
    static const char hooks[] = "OCIVENDIR_SERVER_TEST_HOOKS=";
    if (strncmp(entry, hooks, sizeof(hooks) - 1) == 0)
        return 0;
    static const char *const kept[] = {"PATH=", "HOME=", "TMPDIR=", "XDG_RUNTIME_DIR=", "LC_ALL=", "LC_CTYPE=",
                                       "LANG=", NULL};
    for (int i = 0; kept[i]; i++)
        if (strncmp(entry, kept[i], strlen(kept[i])) == 0)
            return 1;
    return strncmp(entry, "OCIVENDIR_SERVER_", 17) == 0;
}

/* The path of the build's file D/server-<build>.<kind> in `path` (PATH_MAX bytes); 0 when it does not fit. */
static int build_file(const char *dir, const char *kind, char *path) {
    int w = snprintf(path, PATH_MAX, "%s/server-%s.%s", dir, OCIVENDIR_BUILD, kind);
    return w >= 0 && (size_t)w < PATH_MAX;
}

/* The build's file D/server-<build>.<kind> (`start`: the start lock; `lock`: the server's own) opened with `flags`
 * (never through a final symlink; created 0600 with O_CREAT): its descriptor, or -1 (as when the path does not fit).
 * Read-only, it is opened with O_NONBLOCK: a FIFO found at the path is never waited on for a writer. */
static int open_build_file(const char *dir, const char *kind, int flags) {
    char path[PATH_MAX];
    if (!build_file(dir, kind, path))
        return -1;
    return open(path, flags | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* Whether the file open as `fd` is still D/server-<build>.<suffix> (same device and inode): a server of another build
 * removes a build's lock files while it holds them (server/sweep.py), so a lock taken on a removed file is no lock. */
static int still_at(const char *dir, const char *suffix, int fd) {
    char path[PATH_MAX];
    struct stat held, current;
    if (!build_file(dir, suffix, path) || fstat(fd, &held) != 0 || lstat(path, &current) != 0)
        return 0;
    return held.st_dev == current.st_dev && held.st_ino == current.st_ino;
}

/* Whether this build's server holds its lock, D/server-<build>.lock (it does for its whole life): a shared lock on it
 * is refused then (asked for without waiting, and let go at once). */
static int server_runs(const char *dir) {
    int fd = open_build_file(dir, "lock", O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return 0;
    int held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}

/* Starts `<install dir>/ocivendir server start --foreground` detached: its own session, stdio on /dev/null, the
 * build's start lock on descriptor 3 and no other inherited descriptor, a scrubbed environment, not our child (double
 * fork; the intermediate child is reaped here). The start lock (an flock on D/server-<build>.start, which the server
 * lets go once it listens) makes the calls of a burst start one server: a call that finds it held starts none.
 * Returns 1 when a start is under way (this call's or another's), 0 when none could be made (the call then runs
 * in-process at once). */
static int start_server(const char *dir) {
    char path[PATH_MAX];
    program_path(path, "ocivendir");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return 0;
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0700)
        return 0;
    int lock = -1;
    for (int take = 0; lock < 0; take++) {
        if (take == START_RETAKES)
            return 1; /* removed under us each time: other processes are at work here */
        lock = open_build_file(dir, "start", O_RDWR | O_CREAT);
        if (lock < 0)
            return 0;
        if (flock(lock, LOCK_EX | LOCK_NB) != 0) { /* a start is under way */
            close(lock);
            return 1;
        }
        if (!still_at(dir, "start", lock)) { /* a server of another build swept the file away: take the new one */
            close(lock);
            lock = -1;
        }
    }
    if (server_runs(dir)) { /* an earlier start's server listens now (and let the start lock go): start none */
        close(lock);
        return 1;
    }
    size_t count = 0;
    while (environ && environ[count])
        count++;
    char **env = calloc(count + 1, sizeof(char *));
    if (!env) {
        close(lock);
        return 0;
    }
    for (size_t i = 0, n = 0; i < count; i++)
        if (kept_for_server(environ[i]))
            env[n++] = environ[i];
    pid_t child = fork();
    if (child < 0) {
        free(env);
        close(lock);
        return 0;
    }
    if (child == 0) {
        if (setsid() < 0)
            _exit(1);
        pid_t grandchild = fork();
        if (grandchild != 0)
            _exit(grandchild < 0 ? 1 : 0);
        int null = open("/dev/null", O_RDWR);
        if (null < 0)
            _exit(127);
        for (int fd = 0; fd < 3; fd++)
            if (null != fd && dup2(null, fd) < 0)
                _exit(127);
        if (lock != 3 ? dup2(lock, 3) < 0 : fcntl(3, F_SETFD, 0) < 0) /* a duplicate is inheritable */
            _exit(127);
        close_from(4);
        if (chdir("/") != 0)
            _exit(127);
        /* argv[0] the program's path: PyInstaller's bootloader finds itself through it where /proc is absent */
        char *args[] = {path, "server", "start", "--foreground", NULL};
        execve(path, args, env);
        _exit(127);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    free(env);
    close(lock);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0; /* the intermediate child forked the server */
}

/* Waits up to START_WAIT_MS for a starting server to listen: the start lock is the starting server's until it listens
 * (or ends), so a shared lock taken on it means the server listens, or is gone. Polled, so a signal or a lock never
 * released costs at most the bound. 1 when it was let go; 0 when the wait ran out (the call then runs in-process). */
static int await_start(const char *dir) {
    int lock = open_build_file(dir, "start", O_RDONLY | O_NONBLOCK);
    if (lock < 0)
        return 0;
    const struct timespec step = {.tv_sec = 0, .tv_nsec = START_POLL_MS * 1000000L};
    for (int waited = 0;; waited += START_POLL_MS) {
        if (flock(lock, LOCK_SH | LOCK_NB) == 0) {
            close(lock); /* let go at once: the next start of a burst takes it exclusively */
            return 1;
        }
        if ((errno != EWOULDBLOCK && errno != EINTR) || waited >= START_WAIT_MS) {
            close(lock);
            return 0;
        }
        nanosleep(&step, NULL);
    }
}

/* A server refused this caller as favoured over it (`Y`) and retires: once its lock is let go (within
 * REPLACE_WAIT_MS), start one, at this caller's scheduling, which serves it and the callers the old one served.
 * 0 when the lock was still held at the end of the wait (none started). */
static int start_replacement(const char *dir) {
    const struct timespec step = {.tv_sec = 0, .tv_nsec = START_POLL_MS * 1000000L};
    for (int waited = 0; server_runs(dir); waited += START_POLL_MS) {
        if (waited >= REPLACE_WAIT_MS)
            return 0; /* still there: the next call starts one, or finds it serving */
        nanosleep(&step, NULL);
    }
    start_server(dir);
    return 1;
}

/* The first variable set that acts when a program starts (server/interpreter.py), or NULL: a call that sets one runs
 * in-process, where it applies, and never in a server started without it. */
static const char *startup_variable(void) {
    static const char *const prefixes[] = {"PYTHON", "LD_", "MALLOC_", "OPENSSL_", NULL};
    static const char *const names[] = {"GLIBC_TUNABLES", "GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES",
                                        "RES_OPTIONS", "LOCALDOMAIN", NULL};
    static const char *const harmless[] = {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", NULL};
    static char name[256];
    for (size_t i = 0; environ && environ[i]; i++) {
        const char *eq = strchr(environ[i], '=');
        if (!eq || eq[1] == '\0' || (size_t)(eq - environ[i]) >= sizeof(name))
            continue;
        memcpy(name, environ[i], (size_t)(eq - environ[i]));
        name[eq - environ[i]] = '\0';
        int hit = 0, skip = 0;
        for (int k = 0; prefixes[k] && !hit; k++)
            hit = strncmp(name, prefixes[k], strlen(prefixes[k])) == 0;
        for (int k = 0; names[k] && !hit; k++)
            hit = strcmp(name, names[k]) == 0;
        for (int k = 0; harmless[k] && hit && !skip; k++)
            skip = strcmp(name, harmless[k]) == 0;
        if (hit && !skip)
            return name;
    }
    return NULL;
}

/* ---- the socket directory ------------------------------------------------------------------------------- */

enum dir_state { DIR_OK, DIR_MISSING, DIR_UNUSABLE };

static int absolute(const char *s) {
    return s && s[0] == '/';
}

/* Resolves and checks D (protocol: OCIVENDIR_SERVER_DIR, XDG_RUNTIME_DIR/ocivendir, <tmp>/ocivendir-<euid>). */
static enum dir_state socket_dir(char *dir, size_t size, char *reason) {
    const char *env = getenv("OCIVENDIR_SERVER_DIR");
    int w;
    if (env && *env) {
        if (!absolute(env)) {
            snprintf(reason, REASON_MAX, "OCIVENDIR_SERVER_DIR is not an absolute path: %.300s", env);
            return DIR_UNUSABLE;
        }
        w = snprintf(dir, size, "%s", env);
    } else if (absolute(getenv("XDG_RUNTIME_DIR"))) {
        w = snprintf(dir, size, "%s/ocivendir", getenv("XDG_RUNTIME_DIR"));
    } else {
        const char *tmp = getenv("TMPDIR");
        w = snprintf(dir, size, "%s/ocivendir-%lu", absolute(tmp) ? tmp : "/tmp", (unsigned long)geteuid());
    }
    if (w < 0 || (size_t)w >= size) {
        snprintf(reason, REASON_MAX, "the socket directory's path is too long");
        return DIR_UNUSABLE;
    }
    struct stat st;
    if (lstat(dir, &st) != 0) {
        int err = errno;
        snprintf(reason, REASON_MAX, err == ENOENT ? "no server yet (%.300s: %s); one is starting" : "%.300s: %s", dir,
                 strerror(err));
        return err == ENOENT ? DIR_MISSING : DIR_UNUSABLE;
    }
    if (S_ISLNK(st.st_mode))
        snprintf(reason, REASON_MAX, "%.300s is a symbolic link", dir);
    else if (!S_ISDIR(st.st_mode))
        snprintf(reason, REASON_MAX, "%.300s is not a directory", dir);
    else if (st.st_uid != geteuid())
        snprintf(reason, REASON_MAX, "%.300s is owned by uid %lu, not %lu", dir, (unsigned long)st.st_uid,
                 (unsigned long)geteuid());
    else if ((st.st_mode & 07777) != 0700)
        snprintf(reason, REASON_MAX, "%.300s has mode %04o, not 0700", dir, (unsigned)(st.st_mode & 07777));
    else
        return DIR_OK;
    return DIR_UNUSABLE;
}

/* ---- the request ------------------------------------------------------------------------------------------ */

static size_t add_str(char *body, size_t at, const char *s) {
    size_t n = strlen(s) + 1;
    if (body)
        memcpy(body + at, s, n);
    return at + n;
}

/* Lays out the body (body NULL: only measures it); returns its length. */
static size_t layout(char *body, const char *mask, const char *cwd, int argc, char **argv) {
    char count[24];
    size_t at = 0;
    at = add_str(body, at, "call");
    at = add_str(body, at, OCIVENDIR_BUILD);
    at = add_str(body, at, mask);
    at = add_str(body, at, cwd);
    snprintf(count, sizeof(count), "%d", argc);
    at = add_str(body, at, count);
    for (int i = 0; i < argc; i++)
        at = add_str(body, at, argv[i]);
    size_t envc = 0;
    while (environ && environ[envc])
        envc++;
    snprintf(count, sizeof(count), "%zu", envc);
    at = add_str(body, at, count);
    for (size_t i = 0; i < envc; i++)
        at = add_str(body, at, environ[i]);
    return at;
}

/* Sends the header with the 4 descriptors, then the body. 0 on success; -1 with reason. */
static int send_request(int sock, int argc, char **argv, char *reason) {
    mode_t old = umask(0);
    umask(old);
    char mask[16];
    snprintf(mask, sizeof(mask), "%o", (unsigned)old);
    char *cwd = getcwd(NULL, 0);
    size_t len = layout(NULL, mask, cwd ? cwd : "", argc, argv);
    if (len > MAX_BODY) {
        free(cwd);
        snprintf(reason, REASON_MAX, "the request is larger than 4 MiB");
        return -1;
    }
    char *body = malloc(len);
    if (!body) {
        free(cwd);
        snprintf(reason, REASON_MAX, "out of memory");
        return -1;
    }
    layout(body, mask, cwd ? cwd : "", argc, argv);
    free(cwd);

    int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (here < 0) /* a working directory we may not read: a path descriptor still serves fchdir */
        here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (here < 0) {
        snprintf(reason, REASON_MAX, "cannot open the working directory: %s", strerror(errno));
        free(body);
        return -1;
    }
    unsigned char header[8] = {'O', 'V', 'D', '1', 0, 0, 0, 0};
    put_u32(header + 4, (uint32_t)len);
    int fds[4] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, here};
    union {
        char buf[CMSG_SPACE(sizeof(fds))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof(control));
    struct iovec iov = {.iov_base = header, .iov_len = sizeof(header)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof(control.buf)};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(cmsg), fds, sizeof(fds));
    ssize_t sent;
    do
        sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    int err = errno;
    close(here);
    if (sent < 0 || write_all(sock, header + sent, sizeof(header) - (size_t)sent) != 0 ||
        write_all(sock, body, len) != 0) {
        snprintf(reason, REASON_MAX, "the server did not take the call: %s", strerror(sent < 0 ? err : errno));
        free(body);
        return -1;
    }
    free(body);
    return 0;
}

/* ---- after 'P': wait for 'X', forwarding signals --------------------------------------------------------- */

static void on_signal(int sig) {
    for (int i = 0; i < NFORWARDED; i++)
        if (forwarded[i] == sig)
            pending[i] = 1;
}

static int send_signal_frame(int sock, int sig) {
    unsigned char frame[6] = {'S', 0, 0, 0, 1, (unsigned char)sig};
    return write_all(sock, frame, sizeof(frame));
}

/* Dies of sig, as the worker did on our behalf. */
static _Noreturn void die_of(int sig) {
    sigset_t set;
    signal(sig, SIG_DFL);
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    _exit(128 + sig);
}

static _Noreturn void relay(int sock, uint32_t worker) {
    sigset_t block, wait_mask;
    sigemptyset(&block);
    for (int i = 0; i < NFORWARDED; i++)
        sigaddset(&block, forwarded[i]);
    sigprocmask(SIG_BLOCK, &block, &wait_mask); /* handlers run only inside ppoll: no lost wake-up */
    for (int i = 0; i < NFORWARDED; i++)
        sigdelset(&wait_mask, forwarded[i]);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_mask = block;
    for (int i = 0; i < NFORWARDED; i++) {
        struct sigaction now;
        if (sigaction(forwarded[i], NULL, &now) == 0 && now.sa_handler == SIG_IGN)
            continue; /* started ignored (nohup, a background job): in-process it would be, so it is not relayed */
        sigaction(forwarded[i], &sa, NULL);
    }

    static unsigned char buf[5 + MAX_PAYLOAD];
    size_t have = 0;
    int last_signal = 0;
    for (;;) {
        struct pollfd pfd = {.fd = sock, .events = POLLIN};
        int ready = ppoll(&pfd, 1, NULL, &wait_mask);
        for (int i = 0; i < NFORWARDED; i++) {
            if (pending[i]) {
                pending[i] = 0;
                last_signal = forwarded[i];
                (void)send_signal_frame(sock, forwarded[i]); /* a closed peer shows as EOF below */
            }
        }
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        ssize_t n = read(sock, buf + have, sizeof(buf) - have);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        int bad = 0;
        while (have >= 5) {
            uint32_t len = get_u32(buf + 1);
            if (len > MAX_PAYLOAD) {
                bad = 1;
                break;
            }
            if (have < 5 + (size_t)len)
                break;
            if (buf[0] == 'X') {
                uint32_t status = len == 4 ? get_u32(buf + 5) : 256;
                if (status > 255) {
                    bad = 1;
                    break;
                }
                exit((int)status);
            }
            memmove(buf, buf + 5 + len, have - 5 - len); /* another frame type: not ours to act on */
            have -= 5 + len;
        }
        if (bad)
            break;
    }
    if (last_signal)
        die_of(last_signal);
    fprintf(stderr, "%s: Error: ocivendir server: the call ended without an exit status (worker %lu stopped)\n",
            prog, (unsigned long)worker);
    exit(1);
}

/* ---- main ------------------------------------------------------------------------------------------------- */

/* Descriptors 0-2 that are closed get /dev/null, so that no socket lands there and the worker gets three. */
static void fill_stdio(void) {
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int null = open("/dev/null", O_RDWR);
            if (null >= 0 && null != fd) {
                dup2(null, fd);
                close(null);
            }
        }
    }
}

int main(int argc, char **argv) {
    static char *no_args[] = {"vendir", NULL};
    call_argv = argc > 0 ? argv : no_args;
    if (argc > 0 && argv[0]) {
        const char *slash = strrchr(argv[0], '/');
        prog = slash ? slash + 1 : argv[0];
    }
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--debug") == 0)
            debug = 1;
    fill_stdio();

    const char *mode = getenv("OCIVENDIR_SERVER");
    int on;
    if (!mode || !*mode || strcmp(mode, "auto") == 0)
        on = strcmp(prog, "vendir") == 0;
    else if (strcmp(mode, "on") == 0)
        on = 1;
    else if (strcmp(mode, "off") == 0)
        on = 0;
    else
        run_in_process(NULL, 0); /* the Python program reports the bad value */
    if (!on)
        run_in_process(NULL, 1);

    char reason[REASON_MAX];
    char dir[PATH_MAX];
    const char *variable = startup_variable();
    if (variable) {
        snprintf(reason, REASON_MAX, "%.200s is set: it acts when a program starts", variable);
        run_in_process(reason, 1);
    }
    int started = 0; /* a server was found starting (or started here) and waited for */
    switch (socket_dir(dir, sizeof(dir), reason)) {
    case DIR_MISSING:
        if (!start_server(dir) || !await_start(dir))
            run_in_process(reason, 1);
        started = 1;
        break;
    case DIR_UNUSABLE:
        run_in_process(reason, 1);
        break;
    case DIR_OK:
        break;
    }

    struct sockaddr_un addr;
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    int w = snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/server-%s.sock", dir, OCIVENDIR_BUILD);
    if (w < 0 || (size_t)w >= sizeof(addr.sun_path)) {
        snprintf(reason, REASON_MAX, "the socket path is too long for a Unix socket: %.300s/server-%s.sock", dir,
                 OCIVENDIR_BUILD);
        run_in_process(reason, 1);
    }
    int sock;
    for (;;) {
        sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (sock < 0) {
            snprintf(reason, REASON_MAX, "socket: %s", strerror(errno));
            run_in_process(reason, 1);
        }
        int err = connect(sock, (struct sockaddr *)&addr, sizeof(addr)) != 0 ? errno : 0;
        if (err == EINTR || err == EINPROGRESS) { /* the connection goes on: wait for its outcome */
            struct pollfd pfd = {.fd = sock, .events = POLLOUT};
            socklen_t size = sizeof(err);
            while (poll(&pfd, 1, -1) < 0 && errno == EINTR) {
            }
            if (getsockopt(sock, SOL_SOCKET, SO_ERROR, &err, &size) != 0)
                err = errno;
        }
        if (err == 0)
            break;
        close(sock);
        if (err != ENOENT && err != ECONNREFUSED) {
            snprintf(reason, REASON_MAX, "cannot connect to %.400s: %s", addr.sun_path, strerror(err));
            run_in_process(reason, 1);
        }
        if (started) /* waited for a start, and still no server: not again */
            run_in_process(reason, 1);
        snprintf(reason, REASON_MAX, "no server yet (%.400s: %s); one is starting", addr.sun_path, strerror(err));
        if (!start_server(dir) || !await_start(dir))
            run_in_process(reason, 1);
        started = 1;
    }
    /* the directory was checked before connecting: a path component swapped since could lead to another user's
       listener, which must be handed nothing (environment, stdio, working directory) */
    struct ucred peer;
    socklen_t peer_size = sizeof(peer);
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) != 0 || peer.uid != geteuid()) {
        snprintf(reason, REASON_MAX, "%.400s is not listened on by uid %u", addr.sun_path, (unsigned)geteuid());
        close(sock);
        run_in_process(reason, 1);
    }
    if (send_request(sock, argc > 0 ? argc : 1, call_argv, reason) != 0) {
        close(sock);
        run_in_process(reason, 1);
    }

    unsigned char head[5];
    int got = read_full(sock, head, sizeof(head));
    uint32_t len = got == 1 ? get_u32(head + 1) : 0;
    if (got != 1 || len > MAX_PAYLOAD) {
        snprintf(reason, REASON_MAX, "the server did not take the call");
        close(sock);
        run_in_process(reason, 1);
    }
    static unsigned char payload[MAX_PAYLOAD + 1];
    if (read_full(sock, payload, len) != 1) {
        snprintf(reason, REASON_MAX, "the server did not take the call");
        close(sock);
        run_in_process(reason, 1);
    }
    payload[len] = '\0';
    if (head[0] == 'P' && len == 4)
        relay(sock, get_u32(payload));
    if (head[0] == 'R' || head[0] == 'Y')
        snprintf(reason, REASON_MAX, "%.400s", (char *)payload); /* the server's own reason */
    else
        snprintf(reason, REASON_MAX, "the server did not take the call");
    close(sock);
    if (head[0] == 'Y') { /* favoured over the server, which retires: one started here serves this caller and it */
        strncat(reason,
                start_replacement(dir) ? "; the server retires, and one at this caller's scheduling is starting"
                                       : "; the server retires, and did not let its lock go in time: none started here",
                REASON_MAX - strlen(reason) - 1);
    }
    run_in_process(reason, 1);
    return 1;
}
