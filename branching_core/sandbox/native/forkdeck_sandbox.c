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
 *
 * Pre-building (root callers: native.py's _Prebuild). Before any request, the owner may
 * send a waiting executor "P<key>\n" + fd numbers, with a request of the same format
 * that has no command (lifeline -1, no cgroups or fds, argv "-") and the view helper's
 * mount namespace fd. It then opens the host's "/" (for cgroups and /proc later),
 * enters the namespaces, and forks the init, which runs every step, sets the hostname,
 * brings lo up, drops its capabilities and reports "R" (or its setup-failure record)
 * on a socket to the keeper, then waits. Idle, the keeper watches its mount table
 * (/proc/self/mountinfo, poll): a changed one (the host replaced a path a mask sits
 * on) lets the sandbox go. The request for it is "K<key> DEV:INO\n" + the usual
 * text, with a request without steps: the keeper checks the key, joins the cgroups
 * itself and moves the init into them, hands the init the memfd and fds (SCM_RIGHTS,
 * with the owner's umask), and watches as usual; the init checks that the directory it
 * stands in is the view DEV:INO, puts the fds in place and spawns the command. A setup
 * failure found while pre-building is reported with the request, as a fresh one would.
 * The building runs at SCHED_IDLE, in the executor's autogroup set to nice 19, and goes
 * back to the owner's scheduling at the keeper's first wake (go_background).
 *
 * Spawner (native_pool's source of waiting executors), started by its owner as
 *
 *     forkdeck-sandbox --spawner SOCKET_FD
 *
 * with /dev/null on 0-2: for each message on SOCKET_FD (a SOCK_SEQPACKET socket only its
 * owner holds; EOF ends it) it makes one waiting executor and answers its pid (decimal)
 * with the owner's end of that executor's socket (SCM_RIGHTS), or "E" and no fd. The
 * executor is cloned with CLONE_PARENT (a child of the owner, who reaps it and whose
 * umask it reads) and goes on as "--wait" on its end of the socket: a fork of the
 * spawner, not an exec of this program (which cost ~0.4 ms of CPU per command); its
 * command line reads "--wait" like a started one's. Why a process of its own: a
 * thread of the owner that forks or spawns copies every fd of the owner, close-on-exec
 * ones included, into the child until its exec; a fd the owner passed to a command and
 * closes as that command returns would stay open for that moment whenever the pool
 * refilled just then. This process holds none of the owner's fds.
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
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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
#define NAME_MAX_ 255
#define PATH_MAX_ 4096

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
/* A pre-started executor that failed while pre-building (no result pipe yet) tells the
 * failure once the request comes (pending_sock: the owner's socket); a pre-building init
 * tells its keeper (report_sock). */
static int pending_sock = -1, report_sock = -1;
static void report_pending(void);
static void report_to_keeper(const char *kind, const char *msg);
static int back_to_foreground(void);

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
    if (report_sock >= 0) {
        report_to_keeper(kind, msg);
        _exit(125);
    }
    back_to_foreground();
    report_pending();
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

/* The whole request: a memfd (its size, then pread), or a pipe the caller filled and
 * closed (read to EOF: a pipe is not subject to the caller's RLIMIT_FSIZE, a memfd is). */
static unsigned char *read_request(int request_fd, size_t *len)
{
    struct stat st;
    if (fstat(request_fd, &st) < 0)
        fail("namespace", "malformed sandbox request: %s", strerror(errno));
    size_t size = S_ISFIFO(st.st_mode) ? 65536 : (size_t)st.st_size;
    unsigned char *buf = malloc(size + 1);
    size_t got = 0;
    while (buf != NULL) {
        if (!S_ISFIFO(st.st_mode) && got >= size)
            break;
        if (got == size) {
            unsigned char *more = realloc(buf, size * 2 + 1);
            if (more == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = more;
            size *= 2;
        }
        ssize_t n = S_ISFIFO(st.st_mode) ? read(request_fd, buf + got, size - got)
                                         : pread(request_fd, buf + got, size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 && S_ISFIFO(st.st_mode))
            break;
        if (n <= 0)
            fail("namespace", "malformed sandbox request: short read");
        got += (size_t)n;
    }
    if (buf == NULL)
        fail("namespace", "out of memory reading the sandbox request");
    if (S_ISFIFO(st.st_mode)) {
        /* Read again later (a pre-built init gets the same fd from its keeper): the
         * bytes go in a fresh pipe at the old one's number (a pipe, as the caller's:
         * writing a memfd is subject to the caller's RLIMIT_FSIZE, which we may not be
         * able to lift). It held them, so a pipe of that size can be had. */
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            fail("namespace", "keeping the sandbox request failed: %s", strerror(errno));
        if (got > 65536)
            fcntl(p[1], F_SETPIPE_SZ, (int)got);
        size_t put = 0;
        while (put < got) {
            ssize_t n = write(p[1], buf + put, got - put);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                fail("namespace", "keeping the sandbox request failed: %s", strerror(errno));
            put += (size_t)n;
        }
        close(p[1]);
        if (dup3(p[0], request_fd, O_CLOEXEC) < 0)
            fail("namespace", "keeping the sandbox request failed: %s", strerror(errno));
        close(p[0]);
    }
    *len = got;
    return buf;
}

/* Read and check the request in `request_fd` (left open). */
static void parse_request(int request_fd, struct request *rq)
{
    size_t got;
    unsigned char *buf = read_request(request_fd, &got);
    struct reader r = {buf, got, 0};
    char *magic = next_str(&r);
    if (strcmp(magic, "forkdeck-sandbox/1") != 0)
        fail("namespace", "malformed sandbox request: not forkdeck-sandbox/1");
    rq->lifeline = (int)next_int(&r);
    rq->userns = (int)next_int(&r);
    rq->mntns = (int)next_int(&r);
    rq->netns = (int)next_int(&r);
    rq->flags = next_int(&r);
    rq->new_userns = next_int(&r);
    rq->uid = next_int(&r);
    rq->gid = next_int(&r);
    rq->loopback = next_int(&r);
    rq->hostname = next_str(&r);
    rq->cgroups = next_strs(&r, &rq->ncgroups);
    rq->keep = next_strs(&r, &rq->nkeep);
    rq->argv = next_strs(&r, &rq->nargv);
    rq->env = next_strs(&r, &rq->nenv);
    rq->nsteps = next_count(&r);
    rq->steps = calloc(rq->nsteps + 1, sizeof *rq->steps);
    if (rq->steps == NULL)
        fail("namespace", "out of memory reading the sandbox request");
    for (size_t k = 0; k < rq->nsteps; k++)
        next_step(&r, &rq->steps[k]);
    if (r.pos != r.len)
        fail("namespace", "malformed sandbox request: %zu bytes left over", r.len - r.pos);
    if (rq->nargv == 0)
        fail("namespace", "malformed sandbox request: empty argv");
    if (rq->nkeep > 250)
        fail("namespace", "malformed sandbox request: %zu fds to keep", rq->nkeep);
    for (size_t k = 0; k < rq->nkeep; k++) {
        char *end;
        long fd = strtol(rq->keep[k], &end, 10);
        if (*rq->keep[k] == 0 || *end != 0 || fd < 0 || fd > 65535)
            fail("namespace", "malformed sandbox request: bad fd %s", rq->keep[k]);
    }
    free(buf);
}

/* Close every fd but the command's, our control fds and `extra` (-1s ignored). */
static void keep_only(const struct request *rq, const int *extra, size_t nextra)
{
    int keep[320];
    size_t n = 0;
    for (size_t k = 0; k < rq->nkeep; k++)
        keep[n++] = atoi(rq->keep[k]);
    int own[] = {result_fd, rq->lifeline, rq->userns, rq->mntns, rq->netns};
    for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
        if (own[k] >= 0)
            keep[n++] = own[k];
    for (size_t k = 0; k < nextra && n < sizeof keep / sizeof keep[0]; k++)
        if (extra[k] >= 0)
            keep[n++] = extra[k];
    qsort(keep, n, sizeof keep[0], cmp_int);
    close_all_but(keep, n);
}

/* Join each cgroup file: `pid` 0 is ourselves. `dirfd`: where absolute paths start. */
static void join_cgroups(const struct request *rq, int dirfd, pid_t pid)
{
    char text[32];
    snprintf(text, sizeof text, "%d", (int)pid);
    for (size_t k = 0; k < rq->ncgroups; k++) {
        const char *path = rq->cgroups[k];
        if (dirfd != AT_FDCWD)
            while (*path == '/')
                path++;
        int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, text, strlen(text)) < 0)
            fail("limits", "joining cgroup %s: %s", rq->cgroups[k], strerror(errno));
        close(fd);
    }
}

/* Join the view helper's namespaces, unshare fresh ones (children are in the new pid
 * namespace), map our ids in a new user namespace. */
static void enter_namespaces(struct request *rq)
{
    if (rq->userns >= 0 && setns(rq->userns, CLONE_NEWUSER) < 0)
        fail("namespace", "creating namespaces failed: setns: %s", strerror(errno));
    if (rq->mntns >= 0 && setns(rq->mntns, CLONE_NEWNS) < 0)
        fail("namespace", "creating namespaces failed: setns: %s", strerror(errno));
    if (rq->netns >= 0 && setns(rq->netns, CLONE_NEWNET) < 0)
        fail("namespace", "creating namespaces failed: setns: %s", strerror(errno));
    if (unshare((int)rq->flags) < 0)
        fail("namespace", "creating namespaces failed: unshare: %s", strerror(errno));
    if (rq->new_userns) {
        char map[64];
        write_file("/proc/self/setgroups", "deny");
        snprintf(map, sizeof map, "%ld %ld 1", rq->uid, rq->uid);
        write_file("/proc/self/uid_map", map);
        snprintf(map, sizeof map, "%ld %ld 1", rq->gid, rq->gid);
        write_file("/proc/self/gid_map", map);
    }
    int *ns[] = {&rq->userns, &rq->mntns, &rq->netns};
    for (size_t k = 0; k < 3; k++)
        if (*ns[k] >= 0) {
            close(*ns[k]);
            *ns[k] = -1;
        }
    /* No core dump when re-raising the init's fatal signal. Only now: a non-dumpable
     * process cannot open its own /proc/self/uid_map. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* ---- init and keeper ------------------------------------------------------------- */

/* The init's filesystem and isolation work: everything that does not depend on the
 * command (so a pre-started executor may do it before the request comes). */
static void init_build(struct request *rq)
{
    run_steps(rq->steps, rq->nsteps);
    if (sethostname(rq->hostname, strlen(rq->hostname)) < 0)
        fail("namespace", "sandbox setup failed: sethostname: %s", strerror(errno));
    if (rq->loopback)
        loopback_up();
}

/* The caller's RLIMIT_FSIZE is the command's, not the sandbox's: the executor's own
 * writes (steps writing files into the sandbox's tmpfs...) would fail under a limit of
 * a few kB. It is lifted as the executor starts (to infinity where it may raise the hard
 * limit, else the soft one up to the hard one) and put back right before the command
 * is spawned. */
static struct rlimit user_fsize;
static int user_fsize_saved;

static void lift_fsize(void)
{
    if (getrlimit(RLIMIT_FSIZE, &user_fsize) < 0)
        return;
    user_fsize_saved = 1;
    struct rlimit all = {RLIM_INFINITY, RLIM_INFINITY};
    if (setrlimit(RLIMIT_FSIZE, &all) < 0) {
        all.rlim_cur = user_fsize.rlim_max;
        all.rlim_max = user_fsize.rlim_max;
        setrlimit(RLIMIT_FSIZE, &all);
    }
}

static void restore_fsize(void)
{
    if (user_fsize_saved && setrlimit(RLIMIT_FSIZE, &user_fsize) < 0)
        fail("namespace", "cannot apply the caller's file-size limit: %s", strerror(errno));
}

/* One execve of the command's search: posix_spawnp's rules (glibc's __execvpex): a
 * name with a slash as it is, else each directory of our PATH (the owner's, or
 * "/bin:/usr/bin"), an empty one meaning ".", on to the next only for EACCES (reported
 * if nothing else ran), ENOENT, ESTALE, ENOTDIR, ENODEV and ETIMEDOUT; never /bin/sh
 * for a file without a #! line. Returns errno. Runs in the vfork child. */
static int exec_search(const char *file, char **argv, char **env, const char *path)
{
    if (*file == 0)
        return ENOENT;
    if (strchr(file, '/') != NULL) {
        execve(file, argv, env);
        return errno;
    }
    size_t flen = strlen(file);
    if (flen >= NAME_MAX_)
        return ENAMETOOLONG;
    int got_eacces = 0;
    char buf[PATH_MAX_ + NAME_MAX_ + 2];
    for (const char *dir = path;; dir++) {
        const char *end = strchr(dir, ':');
        size_t dlen = end == NULL ? strlen(dir) : (size_t)(end - dir);
        if (dlen < PATH_MAX_) {
            memcpy(buf, dir, dlen);
            if (dlen > 0)
                buf[dlen++] = '/';
            memcpy(buf + dlen, file, flen + 1);
            execve(buf, argv, env);
            switch (errno) {
            case EACCES:
                got_eacces = 1;
                break;
            case ENOENT: case ESTALE: case ENOTDIR: case ENODEV: case ETIMEDOUT:
                break;
            default:
                return errno;
            }
        }
        if (end == NULL)
            break;
        dir = end;
    }
    return got_eacces ? EACCES : ENOENT;
}

/* Start the command as posix_spawnp with SIGPIPE, SIGXFSZ and SIGINT at their default
 * actions and no signal blocked would, but with vfork and execve: glibc's posix_spawn
 * child also asks and sets every one of the 64 signals' dispositions (~130 system calls
 * between the fork and the exec, ~35 us of each command's start); this program installs
 * no handler, so the signals it inherited ignored are the only ones to reset, and only
 * these three must not stay ignored (the others stay, as posix_spawn leaves them). The
 * exec's error comes back through the memory vfork shares; the failed child is reaped.
 * Returns 0 (and the pid) or the error. */
static int spawn_command(pid_t *child, char **argv, char **env)
{
    const char *env_path = getenv("PATH");
    const char *volatile path = env_path != NULL ? env_path : "/bin:/usr/bin";
    volatile int err = 0;
    pid_t pid = vfork();
    if (pid == 0) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGPIPE, &dfl, NULL);
        sigaction(SIGXFSZ, &dfl, NULL);
        sigaction(SIGINT, &dfl, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        err = exec_search(argv[0], argv, env, path);
        _exit(127);
    }
    if (pid < 0)
        return errno;
    if (err != 0) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return err;
    }
    *child = pid;
    return 0;
}

/* Start the command (capabilities already dropped), be its pid 1, report its end. */
__attribute__((noreturn))
static void init_run(struct request *rq)
{
    pid_t child;
    int status;
    restore_fsize(); /* last: nothing of ours writes a file after this */
    int err = spawn_command(&child, rq->argv, rq->env);
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

__attribute__((noreturn))
static void init_main(struct request *rq)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); /* the keeper's setting: /proc/self stays ours */
    close(rq->lifeline);
    init_build(rq);
    drop_capabilities();
    init_run(rq);
}

/* The keeper's duty once the init runs the command: SIGKILL it when the lifeline
 * reaches EOF, then end as it ended. */
__attribute__((noreturn))
static void keeper_watch(pid_t init, const struct request *rq)
{
    /* The command's fds first, the result pipe last: its EOF then tells the caller
     * that no copy of a passed fd is held here either. */
    for (size_t k = 0; k < rq->nkeep; k++)
        close(atoi(rq->keep[k]));
    close(result_fd);
    int pidfd = (int)syscall(NR_pidfd_open, init, 0);
    if (pidfd < 0) /* cannot watch the lifeline: never leave a sandbox unwatched */
        kill(init, SIGKILL);
    struct pollfd fds[2] = {{pidfd, POLLIN, 0}, {rq->lifeline, POLLIN, 0}};
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

/* ---- pre-started ------------------------------------------------------------------ */

#define MAX_PASSED 250

/* The umask of process `pid` from its status under `dirfd` ("/" or the host's root),
 * or -1. */
static int umask_of(int dirfd, pid_t pid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "%sproc/%d/status", dirfd == AT_FDCWD ? "/" : "", (int)pid);
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *at = strstr(buf, "\nUmask:");
    return at == NULL ? -1 : (int)strtol(at + 7, NULL, 8);
}

/* The owner's umask (a pre-started executor's own is the one it was started with). */
static void owner_umask(void)
{
    int mask = umask_of(AT_FDCWD, getppid());
    if (mask >= 0)
        umask((mode_t)mask);
}

struct message {
    char data[65536];
    int fds[MAX_PASSED];
    int nfds;
    char *text; /* after the optional first line ("P..."/"K..."/umask) */
};

static struct message msg_buf;

/* One message with its fds; returns 0 on EOF. Exits 125 on a malformed one. */
static int receive(int sock, struct message *m)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * MAX_PASSED)];
    } control;
    struct iovec iov = {m->data, sizeof m->data - 1};
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
        return 0;
    m->nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < k && m->nfds < MAX_PASSED; i++)
                memcpy(&m->fds[m->nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
    m->data[n] = 0;
    m->text = m->data;
    /* Nobody to tell yet (the result pipe is among the fds): a bad message is exit 125. */
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC) || m->nfds < 1) {
        dprintf(2, "forkdeck-sandbox: malformed pre-started request\n");
        _exit(125);
    }
    return 1;
}

/* The message's first line (its kind and key); m->text moves past it. */
static char *first_line(struct message *m)
{
    char *nl = strchr(m->text, '\n');
    if (nl == NULL) {
        dprintf(2, "forkdeck-sandbox: malformed pre-started request\n");
        _exit(125);
    }
    *nl = 0;
    char *line = m->text;
    m->text = nl + 1;
    return line;
}

/* Put the message's fds at the numbers its text gives ("N N N...\nPATH"); our own
 * `privs` move out of the way first. Fills want[]; sets PATH when given. */
static void place(struct message *m, int *want, int **privs, size_t nprivs)
{
    int top = 2;
    char *p = m->text, *end;
    for (int i = 0; i < m->nfds; i++) {
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
    for (size_t k = 0; k < nprivs; k++) {
        if (*privs[k] < 0)
            continue;
        int high = fcntl(*privs[k], F_DUPFD_CLOEXEC, top + 1);
        if (high < 0)
            _exit(125);
        close(*privs[k]);
        *privs[k] = high;
    }
    for (int i = 0; i < m->nfds; i++) {
        int high = fcntl(m->fds[i], F_DUPFD_CLOEXEC, top + 1);
        if (high < 0)
            _exit(125);
        close(m->fds[i]);
        m->fds[i] = high;
    }
    for (int i = 0; i < m->nfds; i++) {
        if (dup2(m->fds[i], want[i]) < 0)
            _exit(125);
        close(m->fds[i]);
    }
}

/* Wait for the owner's request and put its fds at their numbers (result_fd set); exits
 * quietly on EOF. A pre-built request's key line is skipped. */
static int take_request(int sock, struct message *m, int *want)
{
    if (!receive(sock, m))
        _exit(0);
    close(sock);
    if (*m->text == 'K')
        first_line(m);
    if (m->nfds < 2) {
        dprintf(2, "forkdeck-sandbox: malformed pre-started request\n");
        _exit(125);
    }
    place(m, want, NULL, 0);
    result_fd = want[1];
    return want[0];
}

static void report_pending(void)
{
    if (result_fd < 0 && pending_sock >= 0) {
        int sock = pending_sock, want[MAX_PASSED];
        pending_sock = -1;
        take_request(sock, &msg_buf, want);
    }
}

/* A pre-building init tells its keeper how the build went: "R" (ready) or a setup
 * failure record. */
static void report_to_keeper(const char *kind, const char *msg)
{
    static char rec[1 + 8 + 64 + 8 + 4096];
    size_t lk = strlen(kind), lm = strlen(msg), at = 0;
    lk = lk > 64 ? 64 : lk;
    lm = lm > 4096 ? 4096 : lm;
    rec[at++] = 'S';
    for (int i = 0; i < 8; i++)
        rec[at++] = (char)((uint64_t)lk >> (8 * i));
    memcpy(rec + at, kind, lk);
    at += lk;
    for (int i = 0; i < 8; i++)
        rec[at++] = (char)((uint64_t)lm >> (8 * i));
    memcpy(rec + at, msg, lm);
    at += lm;
    send(report_sock, rec, at, MSG_NOSIGNAL);
}

/* The pre-built sandbox: its key, its init (waiting for the command) and our end of
 * the socket to it, and the host's root (cgroups and /proc as the owner sees them). */
static char prebuilt_key[160];
static pid_t prebuilt_init = -1;
static int init_sock = -1, host_root = -1;

/* Pre-building runs in the background: the owner's next command, and anything else the
 * machine runs, goes first. Right after a command ends the owner has the next executor
 * pre-build its sandbox (namespaces, a network namespace, ~70 mounts: 2-2.5 ms of wall
 * time on a 2-core machine); a command started meanwhile competes with it (and measured
 * about 1 ms slower when they overlapped, most of it the kernel's network namespace
 * work, which no scheduling of ours reaches: docs/floors.md). So the keeper builds at
 * SCHED_IDLE, its init inherits that, and both go back to the scheduling they had (the
 * owner's, which the command must inherit: policy, nice value, reset-on-fork) at the
 * first thing that wakes the keeper: the init's report, the request, EOF or a mount
 * change; a request never runs at the idle policy. Only where going back is certain to
 * be allowed (CAP_SYS_NICE, which a root owner has) and the policy is an ordinary one
 * (SCHED_OTHER or SCHED_BATCH). */
struct sched_attr_ {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
};
#define SCHED_FLAG_RESET_ON_FORK_ 0x01
static struct sched_attr_ owner_sched;
static int in_background;
static int group_nice = 99; /* our autogroup's nice value to put back (99: none) */

static int has_capability(int cap)
{
    struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &head, data) < 0)
        return 0;
    return (data[CAP_TO_INDEX(cap)].effective & CAP_TO_MASK(cap)) != 0;
}

static void go_background(void)
{
    struct sched_attr_ now;
    memset(&now, 0, sizeof now);
    if (syscall(SYS_sched_getattr, 0, &now, sizeof now, 0) < 0 ||
        (now.sched_policy != SCHED_OTHER && now.sched_policy != SCHED_BATCH) ||
        !has_capability(CAP_SYS_NICE))
        return;
    now.size = sizeof now;
    now.sched_flags &= SCHED_FLAG_RESET_ON_FORK_;
    /* (a fair policy reports its slice here; given back, it would become a custom one) */
    now.sched_runtime = now.sched_deadline = now.sched_period = 0;
    owner_sched = now;
    struct sched_attr_ idle = now;
    idle.sched_policy = SCHED_IDLE;
    if (syscall(SYS_sched_setattr, 0, &idle, 0) < 0)
        return;
    in_background = 1;
    /* With autogroups (kernel.sched_autogroup_enabled) the kernel shares a CPU between
     * sessions first and the idle policy counts only inside ours (setsid made one for
     * this executor): the session is made the nicest for as long, too. Without
     * CAP_SYS_RESOURCE the kernel allows one such change per 100 ms machine-wide, so
     * putting it back could fail: then it is left as it is. */
    if (!has_capability(CAP_SYS_RESOURCE))
        return;
    char buf[128];
    int fd = openat(host_root, "proc/self/autogroup", O_RDWR | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof buf - 1, 0);
    char *at = NULL;
    if (n > 0) {
        buf[n] = 0;
        at = strstr(buf, " nice ");
    }
    if (at != NULL) {
        int nice = atoi(at + 6);
        if (nice < 19 && pwrite(fd, "19", 2, 0) == 2)
            group_nice = nice;
    }
    if (fd >= 0)
        close(fd);
}

/* Back to the owner's scheduling, the init first; 0 on success (or nothing to do). */
static int back_to_foreground(void)
{
    if (!in_background)
        return 0;
    if (group_nice != 99) {
        char text[16];
        int len = snprintf(text, sizeof text, "%d", group_nice);
        int fd = openat(host_root, "proc/self/autogroup", O_WRONLY | O_CLOEXEC);
        ssize_t put = fd < 0 ? -1 : pwrite(fd, text, (size_t)len, 0);
        if (fd >= 0)
            close(fd);
        if (put != len)
            return -1;
        group_nice = 99;
    }
    if (prebuilt_init > 0 && syscall(SYS_sched_setattr, prebuilt_init, &owner_sched, 0) < 0)
        return -1;
    if (syscall(SYS_sched_setattr, 0, &owner_sched, 0) < 0)
        return -1;
    in_background = 0;
    return 0;
}
/* The init's report once it came ("R" or a failure record), and our mount table's
 * mountinfo opened right after it: poll reports any change since. */
static char ready[1 + 8 + 64 + 8 + 4096];
static ssize_t ready_len = -1;
static int mounts_fd = -1;

static void read_ready(void)
{
    do
        ready_len = recv(init_sock, ready, sizeof ready, 0);
    while (ready_len < 0 && errno == EINTR);
    if (ready_len == 1 && ready[0] == 'R')
        mounts_fd = openat(host_root, "proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
}

/* Whether the built sandbox lost or gained a mount since it was built: the host
 * replacing or removing a path a mount sits on (a masked secret renamed over, a
 * hidden directory removed) detaches that mount in every namespace. */
static int stale; /* a change was seen (poll reports each change once) */

static int mounts_changed(void)
{
    if (mounts_fd < 0)
        return 1; /* built, but cannot watch it: never trust it */
    struct pollfd p = {mounts_fd, POLLPRI, 0}; /* POLLIN is always set: not a change */
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLPRI | POLLERR)))
        stale = 1;
    return stale;
}

/* Idle with a pre-built sandbox: wait for the owner's message; a sandbox whose mounts
 * changed meanwhile is let go (the owner's send then fails: it starts a fresh one). */
static void idle_prebuilt(int sock)
{
    for (;;) {
        struct pollfd p[2] = {{sock, POLLIN, 0}, {-1, 0, 0}};
        if (ready_len < 0)
            p[1] = (struct pollfd){init_sock, POLLIN, 0};
        else if (mounts_fd >= 0)
            p[1] = (struct pollfd){mounts_fd, POLLPRI, 0};
        int polled = poll(p, 2, -1);
        if (back_to_foreground() < 0)
            break; /* cannot give the command the owner's scheduling: let it go */
        if (polled < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        if (p[1].revents && ready_len < 0) {
            read_ready();
            /* Not built (a step failed, the init died) or not watchable: let it go;
             * a fresh start does it again and reports what fails. */
            if (ready_len != 1 || ready[0] != 'R' || mounts_fd < 0)
                break;
            continue;
        }
        if (p[1].revents & (POLLPRI | POLLERR)) {
            stale = 1;
            break;
        }
        if (p[0].revents)
            return; /* the owner's message (or EOF) */
    }
    /* Stale. A request sent before this shutdown is answered (with a setup error);
     * any later send fails with EPIPE. */
    shutdown(sock, SHUT_RD);
    struct pollfd q = {sock, POLLIN, 0};
    if (poll(&q, 1, 0) > 0)
        return;
    kill(prebuilt_init, SIGKILL);
    waitpid(prebuilt_init, NULL, 0);
    _exit(0);
}

/* In the pre-built init: wait for the command's fds and request from the keeper, then
 * run it as a fresh init would. */
__attribute__((noreturn))
static void init_prebuilt(struct request *built, int sock)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    init_build(built);
    /* Nothing left needs one: dropped before the request, off the command's start. */
    drop_capabilities();
    report_sock = -1;
    if (send(sock, "R", 1, MSG_NOSIGNAL) < 0)
        _exit(0);
    /* "UMASK DEV:INO\nFD FD...\nPATH" */
    struct message *m = &msg_buf;
    if (!receive(sock, m))
        _exit(0); /* the keeper let the sandbox go */
    char *head = first_line(m), *end;
    int want[MAX_PASSED];
    int *privs[] = {&sock};
    place(m, want, privs, 1);
    result_fd = want[1];
    long mask = strtol(head, &end, 8);
    unsigned long long dev = 0, ino = 0;
    if (end == head || mask < 0 || sscanf(end, " %llu:%llu", &dev, &ino) != 2)
        fail("namespace", "malformed pre-built request");
    umask((mode_t)mask);
    struct request rq;
    parse_request(want[0], &rq);
    close(want[0]);
    close(rq.lifeline);
    rq.lifeline = rq.userns = rq.mntns = rq.netns = -1;
    /* Defence in depth (the caller compared the keys): the directory we stand in must
     * be the view the caller sees now. */
    struct stat here;
    if (stat(".", &here) < 0 || (unsigned long long)here.st_dev != dev ||
        (unsigned long long)here.st_ino != ino)
        fail("namespace", "the pre-built sandbox does not show the requested view");
    keep_only(&rq, NULL, 0);
    fcntl(result_fd, F_SETFD, FD_CLOEXEC);
    init_run(&rq);
}

/* "P<key>\nFD FD..." with the pre-build request (no command) and the plan's namespace
 * fds: enter the namespaces and fork the init, which builds the sandbox and waits. */
static void prebuild(int *sock, struct message *m)
{
    char *key = first_line(m) + 1;
    snprintf(prebuilt_key, sizeof prebuilt_key, "%s", key);
    pending_sock = *sock; /* a failure from here on is told with the request */
    host_root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (host_root < 0)
        fail("namespace", "opening / failed: %s", strerror(errno));
    int want[MAX_PASSED];
    int *privs[] = {sock, &host_root};
    place(m, want, privs, 2);
    pending_sock = *sock;
    struct request rq;
    parse_request(want[0], &rq);
    close(want[0]);
    owner_umask();
    int extra[] = {*sock, host_root};
    keep_only(&rq, extra, 2);
    go_background();
    enter_namespaces(&rq);
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
        fail("namespace", "socketpair failed: %s", strerror(errno));
    pid_t init = fork();
    if (init < 0)
        fail("namespace", "forking the sandbox init failed: %s", strerror(errno));
    if (init == 0) {
        pending_sock = -1;
        in_background = 0; /* (its keeper brings it back) */
        group_nice = 99;
        close(*sock);
        close(host_root);
        close(pair[0]);
        report_sock = pair[1];
        init_prebuilt(&rq, pair[1]);
    }
    close(pair[1]);
    init_sock = pair[0];
    prebuilt_init = init;
    pending_sock = -1;
}

/* One message of `len` bytes with `nfds` (at most MAX_PASSED, maybe none) fds attached by
 * SCM_RIGHTS; sendmsg's result (no retry: a caller that may be interrupted loops). */
static ssize_t send_with_fds(int sock, const char *text, size_t len, const int *fds,
                             size_t nfds)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * MAX_PASSED)];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {(void *)text, len};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (nfds > 0) {
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL);
}

/* The request for the pre-built sandbox: join its cgroups (ours and the init's), hand
 * the init the command, then watch it as usual. */
__attribute__((noreturn))
static void run_prebuilt(int sock, struct message *m)
{
    char *line = first_line(m);
    char *view = strchr(line, ' ');
    int want[MAX_PASSED];
    /* Every fd of our own moves out of the way of the numbers wanted (the owner's socket
     * and the mount table's watch too: a command's fd placed at their number was closed
     * with the socket, or polled as the watch). */
    int *privs[] = {&init_sock, &host_root, &sock, &mounts_fd};
    if (m->nfds < 2) {
        dprintf(2, "forkdeck-sandbox: malformed pre-started request\n");
        _exit(125);
    }
    char *targets = m->text;
    place(m, want, privs, sizeof privs / sizeof privs[0]);
    close(sock);
    result_fd = want[1];
    if (view != NULL)
        *view++ = 0;
    if (*line != 'K' || view == NULL || strcmp(line + 1, prebuilt_key) != 0)
        fail("namespace", "the pre-built sandbox is not the requested one");
    struct request rq;
    parse_request(want[0], &rq);
    int extra[] = {init_sock, host_root, want[0], mounts_fd}; /* (the watch polled below) */
    keep_only(&rq, extra, 4);
    fcntl(result_fd, F_SETFD, FD_CLOEXEC);
    fcntl(rq.lifeline, F_SETFD, FD_CLOEXEC);

    if (back_to_foreground() < 0) {
        kill(prebuilt_init, SIGKILL);
        waitpid(prebuilt_init, NULL, 0);
        fail("namespace", "the pre-built sandbox cannot be given the caller's scheduling"
             " policy back: %s", strerror(errno));
    }
    if (ready_len < 0)
        read_ready();
    ssize_t n = ready_len;
    if (n != 1 || ready[0] != 'R') {
        if (n > 0 && ready[0] == 'S') /* its setup failed: the caller hears why */
            write_all(result_fd, ready, (size_t)n);
        kill(prebuilt_init, SIGKILL);
        waitpid(prebuilt_init, NULL, 0);
        if (n > 0 && ready[0] == 'S')
            _exit(125);
        fail("namespace", "the pre-built sandbox's init ended before the command");
    }
    if (mounts_changed()) {
        kill(prebuilt_init, SIGKILL);
        waitpid(prebuilt_init, NULL, 0);
        fail("namespace", "the pre-built sandbox lost a mount just before the command came"
             " (a hidden or masked path was replaced on the host): run it again");
    }
    join_cgroups(&rq, host_root, 0);
    join_cgroups(&rq, host_root, prebuilt_init);
    int mask = umask_of(host_root, getppid());
    char text[65536];
    int len = snprintf(text, sizeof text, "%o %s\n%s", mask < 0 ? 022 : mask, view, targets);
    if (len < 0 || (size_t)len >= sizeof text)
        fail("namespace", "pre-built request too long");
    if (send_with_fds(init_sock, text, (size_t)len, want, (size_t)m->nfds) < 0) {
        kill(prebuilt_init, SIGKILL);
        waitpid(prebuilt_init, NULL, 0);
        fail("namespace", "handing the command to the pre-built sandbox failed: %s",
             strerror(errno));
    }
    close(want[0]);
    close(init_sock);
    close(host_root);
    if (mounts_fd >= 0)
        close(mounts_fd);
    keeper_watch(prebuilt_init, &rq);
}

/* ---- spawner ---------------------------------------------------------------------- */

static void waiting_main(int sock);

/* Our command line as the kernel shows it (/proc/PID/cmdline): a waiting executor made
 * by the spawner is a fork of it, not an exec, and is seen as "--wait" all the same. */
static char *arg_role;
static size_t arg_role_len;

/* In the spawner's child: become a waiting executor on `sock` (it held nothing else of
 * the spawner's but `exe`, closed here). A fork, not an exec of this program: the
 * spawner has the state a fresh start would have (lifted file-size limit with the
 * owner's saved, /dev/null on 0-2, its own session, "/" as its directory, no handler, the
 * environment it was started with), and an exec of this static binary cost ~0.4 ms of
 * CPU per command. */
__attribute__((noreturn))
static void become_waiting(int exe, int sock)
{
    close(exe);
    if (arg_role != NULL && arg_role_len >= 6) {
        memset(arg_role, 0, arg_role_len);
        memcpy(arg_role, "--wait", 6);
    }
    waiting_main(sock);
}

/* The spawner's loop: one waiting executor per message, until EOF. */
__attribute__((noreturn))
static void spawner_main(int sock)
{
    setsid(); /* out of the caller's terminal job, as a waiting executor */
    if (chdir("/") < 0)
        _exit(125);
    fcntl(sock, F_SETFD, FD_CLOEXEC);
    int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (exe < 0)
        _exit(125);
    for (;;) {
        char byte;
        ssize_t n = recv(sock, &byte, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(0); /* the owner let us go, exited or died */
        int pair[2] = {-1, -1};
        pid_t pid = -1;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0) {
            pid = (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
            if (pid == 0) {
                close(sock);
                close(pair[0]);
                become_waiting(exe, pair[1]);
            }
            close(pair[1]);
        }
        char text[32];
        int len = pid > 0 ? snprintf(text, sizeof text, "%d", (int)pid)
                          : snprintf(text, sizeof text, "E");
        ssize_t sent;
        do
            sent = send_with_fds(sock, text, (size_t)len, &pair[0], pid > 0 ? 1 : 0);
        while (sent < 0 && errno == EINTR);
        if (pair[0] >= 0)
            close(pair[0]); /* the owner has its copy: only it may keep the executor waiting */
        if (sent < 0)
            _exit(0); /* the owner is gone (the executor sees EOF and ends) */
    }
}

/* A fresh executor's work once its request is in place: parse it, keep only the
 * command's fds and our own, join the cgroups and namespaces, fork the init, watch it. */
__attribute__((noreturn))
static void run_request(int request_fd)
{
    struct request rq;
    parse_request(request_fd, &rq);
    close(request_fd);

    /* Only the command's fds and our own control fds survive. */
    keep_only(&rq, NULL, 0);
    fcntl(result_fd, F_SETFD, FD_CLOEXEC);
    fcntl(rq.lifeline, F_SETFD, FD_CLOEXEC);
    join_cgroups(&rq, AT_FDCWD, 0);
    enter_namespaces(&rq);

    pid_t init = fork();
    if (init < 0)
        fail("namespace", "forking the sandbox init failed: %s", strerror(errno));
    if (init == 0)
        init_main(&rq);
    keeper_watch(init, &rq);
}

/* A waiting executor ("--wait"): the owner's messages on `sock` until its request. */
__attribute__((noreturn))
static void waiting_main(int sock)
{
    setsid(); /* out of the caller's terminal job: a ^C is the caller's to decide */
    if (chdir("/") < 0) /* a waiting executor pins no directory of its owner's */
        _exit(125);
    struct message *m = &msg_buf;
    for (;;) {
        if (prebuilt_init > 0)
            idle_prebuilt(sock);
        if (!receive(sock, m)) { /* the owner let us go, exited or died */
            if (prebuilt_init > 0) {
                kill(prebuilt_init, SIGKILL);
                waitpid(prebuilt_init, NULL, 0);
            }
            _exit(0);
        }
        if (*m->text == 'P' && prebuilt_init < 0) {
            prebuild(&sock, m);
            continue;
        }
        break;
    }
    if (prebuilt_init > 0)
        run_prebuilt(sock, m);
    close(sock);
    if (*m->text == 'K' || *m->text == 'P') {
        int want[MAX_PASSED];
        first_line(m);
        if (m->nfds >= 2) {
            place(m, want, NULL, 0);
            result_fd = want[1];
        }
        fail("namespace", "a pre-built request reached an executor with nothing built");
    }
    if (m->nfds < 2) {
        dprintf(2, "forkdeck-sandbox: malformed pre-started request\n");
        _exit(125);
    }
    int want[MAX_PASSED];
    place(m, want, NULL, 0);
    result_fd = want[1];
    owner_umask();
    run_request(want[0]);
}

int main(int argc, char **argv)
{
    lift_fsize();
    if (argc == 3 && strcmp(argv[1], "--spawner") == 0) {
        arg_role = argv[1];
        arg_role_len = strlen(argv[1]);
        spawner_main(atoi(argv[2]));
    }
    if (argc == 3 && strcmp(argv[1], "--wait") == 0)
        waiting_main(atoi(argv[2]));
    if (argc == 3) {
        result_fd = atoi(argv[2]);
        setsid();
        run_request(atoi(argv[1]));
    }
    dprintf(2, "usage: forkdeck-sandbox REQUEST_FD RESULT_FD (started by forkdeck)\n");
    return 125;
}
