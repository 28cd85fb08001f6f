/*
 * forkdeck-sandbox: the keeper and pid-namespace init of a sandboxed command.
 *
 * Why native: the Python keeper/init are forks of a Python process; each command then
 * paid ~1,200 page faults and ~8 ms of CPU for two copies of an interpreter. This
 * program does exactly what _spawn._keeper and _spawn._init + _command_init do, for
 * commands only (callables still need a fork of their caller), and decides nothing:
 * every mount comes from the step list the caller compiled (steps.compile_steps).
 *
 * Started by the caller with posix_spawn as
 *
 *     forkdeck-sandbox REQUEST_FD RESULT_FD
 *
 * with the command's fds already at their numbers (0, 1, 2, extra fds) and the
 * request (a memfd) at REQUEST_FD. The request is a sequence of strings, each a
 * little-endian u32 length then that many bytes (no terminator); integers are decimal
 * strings. In order:
 *
 *     "forkdeck-sandbox/1"
 *     lifeline_fd  userns_fd  mntns_fd  netns_fd  (-1: none; netns: join, not make)
 *     unshare_flags  new_userns  uid  gid  loopback (1: bring lo up)
 *     hostname
 *     n, then n cgroup.procs paths to join
 *     n, then n fds the command keeps (0, 1, 2 and extra fds)
 *     n, then argv[0..n-1]
 *     n, then n "NAME=value" environment entries
 *     n, then n steps: op need when when_path missing_ok, then op's arguments
 *        (steps.OPS gives each op's argument list; same meaning as run_steps)
 *
 * Towards the caller it speaks _spawn's protocol on RESULT_FD: a setup failure is
 * "S" + <u64 len>"namespace"|"limits" + <u64 len>message, then exit 125; the command's
 * end is "X" + <u64 4> + its raw wait status (written by the init). The keeper
 * SIGKILLs the init when the lifeline (whose write end only the caller holds) reaches
 * EOF, then re-raises the init's fatal signal or exits with its code.
 *
 * Pre-started (native.py's executor pool), it is started ahead as
 *
 *     forkdeck-sandbox --wait SOCKET_FD
 *
 * with /dev/null on 0-2, and blocks reading one message from SOCKET_FD (a
 * SOCK_SEQPACKET socket whose other end only its owner holds): EOF (the owner let it
 * go, exited or died) ends it at once. The message carries the fds by SCM_RIGHTS, the
 * request memfd first and the result pipe second, and its text is the number each fd
 * must take (decimal, space separated), a newline, then the owner's PATH (the command's
 * PATH search). It then takes the owner's current umask from /proc and goes on exactly
 * as if it had been started with those fds in place.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

/* Generic syscall numbers (same on x86_64 and aarch64); libc may lack wrappers. */
#define NR_open_tree 428
#define NR_move_mount 429
#define NR_pidfd_open 434
#define NR_close_range 436
#define NR_mount_setattr 442

#define OPEN_TREE_CLONE_ 1
#define AT_RECURSIVE_ 0x8000
#define MOVE_MOUNT_F_EMPTY_PATH_ 0x4
#define MOUNT_ATTR_RDONLY_ 0x1
#define MOUNT_ATTR_NOSUID_ 0x2
#define MOUNT_ATTR_NODEV_ 0x4
#define RO_ATTRS (MOUNT_ATTR_RDONLY_ | MOUNT_ATTR_NOSUID_ | MOUNT_ATTR_NODEV_)

struct mount_attr_ {
    uint64_t attr_set, attr_clr, propagation, userns_fd;
};

extern char **environ;

static int result_fd = -1;

/* ---- reporting ------------------------------------------------------------------ */

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; /* the caller is gone: nobody left to tell */
        }
        p += n;
        len -= (size_t)n;
    }
}

static void put_part(int fd, const char *data, size_t len)
{
    unsigned char head[8];
    for (int i = 0; i < 8; i++)
        head[i] = (unsigned char)((uint64_t)len >> (8 * i));
    write_all(fd, head, 8);
    write_all(fd, data, len);
}

/* A setup failure the caller turns into NamespaceError/ResourceLimitError. */
__attribute__((noreturn, format(printf, 2, 3)))
static void fail(const char *kind, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (result_fd >= 0) {
        write_all(result_fd, "S", 1);
        put_part(result_fd, kind, strlen(kind));
        put_part(result_fd, msg, strlen(msg));
    } else {
        dprintf(2, "forkdeck-sandbox: %s\n", msg);
    }
    _exit(125);
}

/* ---- the request ----------------------------------------------------------------- */

struct reader {
    const unsigned char *buf;
    size_t len, pos;
};

/* The next string, copied out NUL-terminated (the request is small). */
static char *next_str(struct reader *r)
{
    if (r->len - r->pos < 4)
        fail("namespace", "malformed sandbox request: truncated at byte %zu", r->pos);
    uint32_t n = (uint32_t)r->buf[r->pos] | (uint32_t)r->buf[r->pos + 1] << 8 |
                 (uint32_t)r->buf[r->pos + 2] << 16 | (uint32_t)r->buf[r->pos + 3] << 24;
    r->pos += 4;
    if (r->len - r->pos < n)
        fail("namespace", "malformed sandbox request: truncated string of %u bytes at byte %zu",
             n, r->pos);
    if (memchr(r->buf + r->pos, 0, n) != NULL)
        fail("namespace", "malformed sandbox request: NUL byte in a string at byte %zu",
             r->pos);
    char *s = malloc((size_t)n + 1);
    if (s == NULL)
        fail("namespace", "out of memory reading the sandbox request");
    memcpy(s, r->buf + r->pos, n);
    s[n] = 0;
    r->pos += n;
    return s;
}

static long next_int(struct reader *r)
{
    size_t at = r->pos;
    char *s = next_str(r), *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || errno != 0)
        fail("namespace", "malformed sandbox request: %s at byte %zu is no integer", s, at);
    free(s);
    return v;
}

/* A count of items that each take at least one string: bounded by what is left. */
static size_t next_count(struct reader *r)
{
    long n = next_int(r);
    if (n < 0 || (size_t)n > (r->len - r->pos) / 4)
        fail("namespace", "malformed sandbox request: bad count %ld", n);
    return (size_t)n;
}

static char **next_strs(struct reader *r, size_t *count)
{
    *count = next_count(r);
    char **v = calloc(*count + 1, sizeof *v);
    if (v == NULL)
        fail("namespace", "out of memory reading the sandbox request");
    for (size_t i = 0; i < *count; i++)
        v[i] = next_str(r);
    return v;
}

#define MAX_ARGS 5
#define MAX_SLOTS 4096

struct step {
    const char *op;
    long need;
    const char *when, *when_path;
    long missing_ok;
    const char *s[MAX_ARGS];
    long i[MAX_ARGS];
};

/* Argument kinds per op, as steps.OPS: "s" string, "i" integer. */
static const struct { const char *op, *args; } OPS[] = {
    {"private", ""}, {"clone", "isi"}, {"opath", "is"}, {"setattr", "siii"},
    {"setattr_fd", "iiii"}, {"mount", "sssis"}, {"overlay", "sis"}, {"kept", "siss"},
    {"move", "is"}, {"mkdir", "si"}, {"ensure_dir", "s"}, {"rmdir", "s"},
    {"touch", "sii"}, {"symlink", "ss"}, {"unlink", "s"}, {"umount", "si"},
    {"close", "i"}, {"chdir", "s"},
};

static void next_step(struct reader *r, struct step *st)
{
    st->op = next_str(r);
    st->need = next_int(r);
    st->when = next_str(r);
    st->when_path = next_str(r);
    st->missing_ok = next_int(r);
    const char *args = NULL;
    for (size_t k = 0; k < sizeof OPS / sizeof OPS[0]; k++)
        if (strcmp(OPS[k].op, st->op) == 0)
            args = OPS[k].args;
    if (args == NULL)
        fail("namespace", "malformed sandbox request: unknown step %s", st->op);
    for (int k = 0; args[k]; k++) {
        if (args[k] == 's')
            st->s[k] = next_str(r);
        else
            st->i[k] = next_int(r);
    }
    /* Slots index a fixed table: a bad one would reach outside it. */
    int bad = st->need < -1 || st->need >= MAX_SLOTS;
    if (strcmp(st->op, "clone") == 0 || strcmp(st->op, "opath") == 0 ||
        strcmp(st->op, "setattr_fd") == 0 || strcmp(st->op, "move") == 0 ||
        strcmp(st->op, "close") == 0)
        bad |= st->i[0] < 0 || st->i[0] >= MAX_SLOTS;
    if (strcmp(st->op, "kept") == 0)
        bad |= st->i[1] < 0 || st->i[1] >= MAX_SLOTS;
    if (strcmp(st->op, "overlay") == 0)
        bad |= st->i[1] < -1 || st->i[1] >= MAX_SLOTS;
    if (bad)
        fail("namespace", "malformed sandbox request: bad slot in step %s", st->op);
}

/* ---- the steps ------------------------------------------------------------------- */

static int slots[MAX_SLOTS];

static int path_is(const char *when, const char *path)
{
    struct stat st, lst;
    if (*when == 0)
        return 1;
    if (strcmp(when, "dir") == 0)
        return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && lstat(path, &lst) == 0 &&
               !S_ISLNK(lst.st_mode);
    if (strcmp(when, "exists") == 0)
        return stat(path, &st) == 0;
    if (strcmp(when, "file") == 0)
        return lstat(path, &lst) == 0 && !(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    if (strcmp(when, "missing") == 0)
        return stat(path, &st) != 0;
    fail("namespace", "malformed sandbox request: unknown condition %s", when);
}

static int setattr(int dirfd, const char *path, long set, long clear, long recursive)
{
    struct mount_attr_ attr = {(uint64_t)set, (uint64_t)clear, 0, 0};
    unsigned flags = (recursive ? AT_RECURSIVE_ : 0) | (*path ? 0 : AT_EMPTY_PATH);
    return (int)syscall(NR_mount_setattr, dirfd, path, flags, &attr, sizeof attr);
}

static int clone_tree(int dirfd, const char *path, long recursive)
{
    unsigned flags = OPEN_TREE_CLONE_ | O_CLOEXEC | (recursive ? AT_RECURSIVE_ : 0) |
                     (*path ? 0 : AT_EMPTY_PATH);
    return (int)syscall(NR_open_tree, dirfd, path, flags);
}

static int move_to(int fd, const char *target)
{
    return (int)syscall(NR_move_mount, fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH_);
}

/* A read-only overlay of `lower_fd` (-1: the target itself) and an empty layer. */
static int overlay(const char *target, int lower_fd, const char *empty)
{
    int own = -1;
    if (lower_fd < 0) {
        own = lower_fd = open(target, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (own < 0)
            return -1;
    }
    char data[256];
    snprintf(data, sizeof data, "lowerdir=/proc/self/fd/%d:%s", lower_fd, empty);
    int rc = mount("overlay", target, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, data);
    int saved = errno;
    if (own >= 0)
        close(own);
    errno = saved;
    return rc;
}

/* mkdir -p: a mount point the read-only host may lack (created in a tmpfs above). */
static int ensure_dir(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    char *p = strdup(path);
    if (p == NULL)
        return -1;
    for (char *q = p + 1;; q++) {
        if (*q == '/' || *q == 0) {
            char c = *q;
            *q = 0;
            if (mkdir(p, 0777) < 0 && errno != EEXIST) {
                free(p);
                return -1;
            }
            *q = c;
            if (c == 0)
                break;
        }
    }
    free(p);
    return 0;
}

/* Returns 0, or -1 with errno and *what naming the failed call. */
static int run_one(const struct step *st, const char **what)
{
    const char *op = st->op;
    *what = op;
    if (strcmp(op, "private") == 0) {
        *what = "mount";
        return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
    }
    if (strcmp(op, "clone") == 0) {
        *what = "open_tree";
        int fd = clone_tree(AT_FDCWD, st->s[1], st->i[2]);
        slots[st->i[0]] = fd;
        return fd < 0 ? -1 : 0;
    }
    if (strcmp(op, "opath") == 0) {
        *what = "open";
        int fd = open(st->s[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
        slots[st->i[0]] = fd;
        return fd < 0 ? -1 : 0;
    }
    if (strcmp(op, "setattr") == 0) {
        *what = "mount_setattr";
        return setattr(AT_FDCWD, st->s[0], st->i[1], st->i[2], st->i[3]);
    }
    if (strcmp(op, "setattr_fd") == 0) {
        *what = "mount_setattr";
        return setattr(slots[st->i[0]], "", st->i[1], st->i[2], st->i[3]);
    }
    if (strcmp(op, "mount") == 0) {
        *what = "mount";
        return mount(*st->s[0] ? st->s[0] : NULL, st->s[1], *st->s[2] ? st->s[2] : NULL,
                     (unsigned long)st->i[3], *st->s[4] ? st->s[4] : NULL);
    }
    if (strcmp(op, "overlay") == 0) {
        *what = "mount";
        return overlay(st->s[0], st->i[1] >= 0 ? slots[st->i[1]] : -1, st->s[2]);
    }
    if (strcmp(op, "kept") == 0) {
        /* Through the socket-hiding overlay (or a bind from its mount's stage); a
         * plain read-only clone when it holds locked child mounts (own user ns). */
        int fd = slots[st->i[1]];
        if (*st->s[2] ? mount(st->s[2], st->s[0], NULL, MS_BIND, NULL) == 0
                      : overlay(st->s[0], fd, st->s[3]) == 0)
            return 0;
        *what = "open_tree";
        int clone = clone_tree(fd, "", 1);
        if (clone < 0)
            return -1;
        int rc = setattr(clone, "", RO_ATTRS, 0, 1);
        *what = "mount_setattr";
        if (rc == 0) {
            rc = move_to(clone, st->s[0]);
            *what = "move_mount";
        }
        int saved = errno;
        close(clone);
        errno = saved;
        return rc;
    }
    if (strcmp(op, "move") == 0) {
        *what = "move_mount";
        return move_to(slots[st->i[0]], st->s[1]);
    }
    if (strcmp(op, "mkdir") == 0)
        return mkdir(st->s[0], (mode_t)st->i[1]);
    if (strcmp(op, "ensure_dir") == 0)
        return ensure_dir(st->s[0]);
    if (strcmp(op, "rmdir") == 0)
        return rmdir(st->s[0]);
    if (strcmp(op, "touch") == 0) {
        int fd = open(st->s[0], O_CREAT | O_WRONLY | O_CLOEXEC | (st->i[2] ? O_EXCL : 0),
                      (mode_t)st->i[1]);
        if (fd < 0)
            return -1;
        int rc = fchmod(fd, (mode_t)st->i[1]); /* whatever the umask */
        close(fd);
        return rc;
    }
    if (strcmp(op, "symlink") == 0)
        return symlink(st->s[0], st->s[1]);
    if (strcmp(op, "unlink") == 0)
        return unlink(st->s[0]);
    if (strcmp(op, "umount") == 0)
        return umount2(st->s[0], (int)st->i[1]);
    if (strcmp(op, "close") == 0) {
        if (slots[st->i[0]] >= 0)
            close(slots[st->i[0]]);
        slots[st->i[0]] = -1;
        return 0;
    }
    if (strcmp(op, "chdir") == 0)
        return chdir(st->s[0]);
    errno = EINVAL;
    return -1;
}

/* The path a failed step names in its message (as the Python executor does). */
static const char *step_path(const struct step *st)
{
    const char *op = st->op;
    if (strcmp(op, "mount") == 0 || strcmp(op, "symlink") == 0)
        return st->s[1];
    if (strcmp(op, "clone") == 0 || strcmp(op, "opath") == 0 || strcmp(op, "move") == 0)
        return st->s[1];
    if (strcmp(op, "setattr_fd") == 0 || strcmp(op, "close") == 0 ||
        strcmp(op, "private") == 0)
        return "/";
    return st->s[0];
}

static void run_steps(struct step *steps, size_t n)
{
    for (size_t k = 0; k < MAX_SLOTS; k++)
        slots[k] = -1;
    for (size_t k = 0; k < n; k++) {
        const struct step *st = &steps[k];
        const char *what;
        if (st->need >= 0 && slots[st->need] < 0)
            continue;
        if (!path_is(st->when, st->when_path))
            continue;
        if (run_one(st, &what) == 0)
            continue;
        if (errno == ENOENT && st->missing_ok)
            continue; /* a slot it would fill stays -1: later steps needing it skip */
        int err = errno;
        if (strcmp(st->op, "ensure_dir") == 0)
            fail("namespace", "sandbox setup failed: mount point %s does not exist and "
                 "cannot be created on the read-only host (%s) (%s)", st->s[0],
                 strerror(err), st->s[0]);
        fail("namespace", "sandbox setup failed: %s: %s (%s)", what, strerror(err),
             step_path(st));
    }
}

/* ---- isolation ------------------------------------------------------------------- */

static void write_file(const char *path, const char *data)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, data, strlen(data)) < 0)
        fail("namespace", "creating namespaces failed: %s: %s", path, strerror(errno));
    close(fd);
}

static void loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strcpy(ifr.ifr_name, "lo");
    ifr.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
    if (s < 0 || ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        fail("namespace", "sandbox setup failed: bringing up loopback: %s", strerror(errno));
    close(s);
}

/* Empty every capability set; with no_new_privs not even a setuid exec gets any back,
 * so the command cannot undo the read-only mounts. */
static void drop_capabilities(void)
{
    for (int cap = 0; cap < 64; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
            break; /* EINVAL past the last capability the kernel knows */
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        fail("namespace", "sandbox setup failed: prctl: %s", strerror(errno));
    struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &head, data) < 0)
        fail("namespace", "sandbox setup failed: capset: %s", strerror(errno));
}

/* Close every fd but 0-2 and `keep` (sorted ascending). */
static void close_all_but(const int *keep, size_t n)
{
    unsigned lo = 3;
    for (size_t k = 0; k <= n; k++) {
        unsigned hi = k < n ? (unsigned)keep[k] : ~0U;
        if (k < n && (unsigned)keep[k] < lo)
            continue;
        if (hi > lo && syscall(NR_close_range, lo, hi - 1, 0) < 0)
            for (unsigned fd = lo; fd < hi && fd < 65536; fd++)
                close((int)fd);
        if (k < n)
            lo = (unsigned)keep[k] + 1;
    }
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* ---- init and keeper ------------------------------------------------------------- */

struct request {
    int lifeline, userns, mntns, netns;
    long flags, new_userns, uid, gid, loopback;
    char *hostname;
    char **cgroups, **keep, **argv, **env;
    size_t ncgroups, nkeep, nargv, nenv, nsteps;
    struct step *steps;
};

__attribute__((noreturn))
static void init_main(struct request *rq)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); /* the keeper's setting: /proc/self stays ours */
    close(rq->lifeline);
    run_steps(rq->steps, rq->nsteps);
    if (sethostname(rq->hostname, strlen(rq->hostname)) < 0)
        fail("namespace", "sandbox setup failed: sethostname: %s", strerror(errno));
    if (rq->loopback)
        loopback_up();
    drop_capabilities();

    posix_spawnattr_t attr;
    sigset_t def, none;
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGXFSZ);
    sigaddset(&def, SIGINT);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t child;
    int status;
    int err = posix_spawnp(&child, rq->argv[0], NULL, &attr, rq->argv, rq->env);
    if (err != 0) {
        dprintf(2, "%s: %s\n", rq->argv[0], strerror(err));
        status = (err == ENOENT ? 127 : 126) << 8;
    } else {
        /* The command's fds are its own: their EOF must not wait for our exit. */
        for (size_t k = 0; k < rq->nkeep; k++)
            close(atoi(rq->keep[k]));
        for (;;) { /* pid 1 duty: reap every orphan until the command itself ends */
            pid_t pid = waitpid(-1, &status, 0);
            if (pid < 0 && errno == EINTR)
                continue;
            if (pid < 0) {
                status = 0;
                break;
            }
            if (pid == child)
                break;
        }
        /* Then end the rest of the pid namespace ourselves (kill(-1) reaches only its
         * members) and reap it: the exit record then promises that nothing of the
         * command runs any more, so the caller need not wait for our own exit and the
         * teardown of the sandbox's mounts that comes with it. */
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
            ;
    }
    unsigned char rec[13] = {'X', 4};
    memcpy(rec + 9, &status, 4); /* little-endian hosts only, like struct "<i" here */
    write_all(result_fd, rec, sizeof rec);
    _exit(0);
}

/* ---- pre-started ------------------------------------------------------------------ */

#define MAX_PASSED 250

/* The owner's umask (a pre-started executor's own is the one it was started with). */
static void owner_umask(void)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)getppid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = 0;
    char *at = strstr(buf, "\nUmask:");
    if (at != NULL)
        umask((mode_t)strtol(at + 7, NULL, 8));
}

/* Wait for the owner's one message; puts its fds at their numbers, returns the
 * request fd and sets result_fd. Exits quietly on EOF (no request will come). */
static int wait_for_request(int sock)
{
    static char data[65536];
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * MAX_PASSED)];
    } control;
    struct iovec iov = {data, sizeof data - 1};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    ssize_t n;
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        _exit(0);
    close(sock);
    int got[MAX_PASSED], ngot = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < k && ngot < MAX_PASSED; i++)
                memcpy(&got[ngot++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
    data[n] = 0;
    /* Nobody to tell yet (the result pipe is among the fds): a bad message is exit 125. */
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC) || ngot < 2) {
        dprintf(2, "forkdeck-sandbox: malformed pre-started request\n");
        _exit(125);
    }
    int want[MAX_PASSED], top = 2;
    char *p = data, *end;
    for (int i = 0; i < ngot; i++) {
        long fd = strtol(p, &end, 10);
        if (end == p || (fd < 3 && i < 2) || fd < 0 || fd > 65535) {
            dprintf(2, "forkdeck-sandbox: malformed pre-started request\n");
            _exit(125);
        }
        want[i] = (int)fd;
        top = want[i] > top ? want[i] : top;
        p = end;
    }
    if (*p == '\n' && setenv("PATH", p + 1, 1) < 0)
        _exit(125);
    /* Every fd first goes above every number wanted, then each takes its number. */
    for (int i = 0; i < ngot; i++) {
        int high = fcntl(got[i], F_DUPFD_CLOEXEC, top + 1);
        if (high < 0)
            _exit(125);
        close(got[i]);
        got[i] = high;
    }
    for (int i = 0; i < ngot; i++) {
        if (dup2(got[i], want[i]) < 0)
            _exit(125);
        close(got[i]);
    }
    result_fd = want[1];
    owner_umask();
    return want[0];
}

int main(int argc, char **argv)
{
    int request_fd;
    if (argc == 3 && strcmp(argv[1], "--wait") == 0) {
        setsid(); /* out of the caller's terminal job: a ^C is the caller's to decide */
        if (chdir("/") < 0) /* a waiting executor pins no directory of its owner's */
            return 125;
        request_fd = wait_for_request(atoi(argv[2]));
    } else if (argc == 3) {
        result_fd = atoi(argv[2]);
        request_fd = atoi(argv[1]);
        setsid();
    } else {
        dprintf(2, "usage: forkdeck-sandbox REQUEST_FD RESULT_FD (started by forkdeck)\n");
        return 125;
    }

    struct stat st;
    if (fstat(request_fd, &st) < 0)
        fail("namespace", "malformed sandbox request: %s", strerror(errno));
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf != NULL && got < (size_t)st.st_size) {
        ssize_t n = pread(request_fd, buf + got, (size_t)st.st_size - got, (off_t)got);
        if (n <= 0)
            fail("namespace", "malformed sandbox request: short read");
        got += (size_t)n;
    }
    if (buf == NULL)
        fail("namespace", "out of memory reading the sandbox request");
    close(request_fd);

    struct reader r = {buf, got, 0};
    struct request rq;
    char *magic = next_str(&r);
    if (strcmp(magic, "forkdeck-sandbox/1") != 0)
        fail("namespace", "malformed sandbox request: not forkdeck-sandbox/1");
    rq.lifeline = (int)next_int(&r);
    rq.userns = (int)next_int(&r);
    rq.mntns = (int)next_int(&r);
    rq.netns = (int)next_int(&r);
    rq.flags = next_int(&r);
    rq.new_userns = next_int(&r);
    rq.uid = next_int(&r);
    rq.gid = next_int(&r);
    rq.loopback = next_int(&r);
    rq.hostname = next_str(&r);
    rq.cgroups = next_strs(&r, &rq.ncgroups);
    rq.keep = next_strs(&r, &rq.nkeep);
    rq.argv = next_strs(&r, &rq.nargv);
    rq.env = next_strs(&r, &rq.nenv);
    rq.nsteps = next_count(&r);
    rq.steps = calloc(rq.nsteps + 1, sizeof *rq.steps);
    if (rq.steps == NULL)
        fail("namespace", "out of memory reading the sandbox request");
    for (size_t k = 0; k < rq.nsteps; k++)
        next_step(&r, &rq.steps[k]);
    if (r.pos != r.len)
        fail("namespace", "malformed sandbox request: %zu bytes left over", r.len - r.pos);
    if (rq.nargv == 0)
        fail("namespace", "malformed sandbox request: empty argv");
    free(buf);

    /* Only the command's fds and our own control fds survive. */
    int keep[300];
    size_t nkeep = 0;
    if (rq.nkeep > 250)
        fail("namespace", "malformed sandbox request: %zu fds to keep", rq.nkeep);
    for (size_t k = 0; k < rq.nkeep; k++) {
        char *end;
        long fd = strtol(rq.keep[k], &end, 10);
        if (*rq.keep[k] == 0 || *end != 0 || fd < 0 || fd > 65535)
            fail("namespace", "malformed sandbox request: bad fd %s", rq.keep[k]);
        keep[nkeep++] = (int)fd;
    }
    keep[nkeep++] = result_fd;
    keep[nkeep++] = rq.lifeline;
    if (rq.userns >= 0)
        keep[nkeep++] = rq.userns;
    if (rq.mntns >= 0)
        keep[nkeep++] = rq.mntns;
    if (rq.netns >= 0)
        keep[nkeep++] = rq.netns;
    qsort(keep, nkeep, sizeof keep[0], cmp_int);
    close_all_but(keep, nkeep);
    fcntl(result_fd, F_SETFD, FD_CLOEXEC);
    fcntl(rq.lifeline, F_SETFD, FD_CLOEXEC);

    for (size_t k = 0; k < rq.ncgroups; k++) {
        int fd = open(rq.cgroups[k], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) < 0)
            fail("limits", "joining cgroup %s: %s", rq.cgroups[k], strerror(errno));
        close(fd);
    }
    if (rq.userns >= 0 && setns(rq.userns, CLONE_NEWUSER) < 0)
        fail("namespace", "creating namespaces failed: setns: %s", strerror(errno));
    if (rq.mntns >= 0 && setns(rq.mntns, CLONE_NEWNS) < 0)
        fail("namespace", "creating namespaces failed: setns: %s", strerror(errno));
    if (rq.netns >= 0 && setns(rq.netns, CLONE_NEWNET) < 0)
        fail("namespace", "creating namespaces failed: setns: %s", strerror(errno));
    if (unshare((int)rq.flags) < 0)
        fail("namespace", "creating namespaces failed: unshare: %s", strerror(errno));
    if (rq.new_userns) {
        char map[64];
        write_file("/proc/self/setgroups", "deny");
        snprintf(map, sizeof map, "%ld %ld 1", rq.uid, rq.uid);
        write_file("/proc/self/uid_map", map);
        snprintf(map, sizeof map, "%ld %ld 1", rq.gid, rq.gid);
        write_file("/proc/self/gid_map", map);
    }
    if (rq.userns >= 0)
        close(rq.userns);
    if (rq.mntns >= 0)
        close(rq.mntns);
    if (rq.netns >= 0)
        close(rq.netns);
    /* No core dump when re-raising the init's fatal signal. Only now: a non-dumpable
     * process cannot open its own /proc/self/uid_map. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    pid_t init = fork();
    if (init < 0)
        fail("namespace", "forking the sandbox init failed: %s", strerror(errno));
    if (init == 0)
        init_main(&rq);

    close(result_fd);
    for (size_t k = 0; k < rq.nkeep; k++)
        close(atoi(rq.keep[k]));
    int pidfd = (int)syscall(NR_pidfd_open, init, 0);
    if (pidfd < 0) /* cannot watch the lifeline: never leave a sandbox unwatched */
        kill(init, SIGKILL);
    struct pollfd fds[2] = {{pidfd, POLLIN, 0}, {rq.lifeline, POLLIN, 0}};
    int killed = 0;
    while (pidfd >= 0) {
        if (poll(fds, killed ? 1 : 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[0].revents)
            break;
        if (!killed && fds[1].revents) { /* the caller closed the lifeline, or died */
            kill(init, SIGKILL);
            killed = 1;
        }
    }
    int status;
    while (waitpid(init, &status, 0) < 0)
        if (errno != EINTR)
            _exit(126);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        signal(sig, SIG_DFL);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        kill(getpid(), sig);
        _exit(128 + sig);
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 126);
}
