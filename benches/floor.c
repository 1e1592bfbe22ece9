/*
 * The read floors of the audit benchmark (issue #39 §1, docs/bench.md):
 * the least a program must do to read every regular file of an inventory,
 * on N threads, with nothing parsed or judged.
 *
 *   floor plain ROOT [THREADS]   open(O_RDONLY), read, close per file
 *   floor rule  ROOT [THREADS]   docs/format.md §2.3: O_PATH|O_NOFOLLOW open,
 *                                fstat (regular file?), reopen through a held
 *                                /proc/self/fd, read, close both
 *
 * THREADS counts the walking thread, as kvcr's KVCR_THREADS does (default:
 * the CPUs this process may run on, kvcr's default). The calling thread
 * walks ROOT with nftw (FTW_PHYS: no symlink followed) and publishes each
 * regular file's path relative to ROOT; THREADS - 1 helpers take the paths
 * in order while the walk goes on, the walking thread reads one itself
 * whenever more than 32 per thread are waiting (all of them with one
 * thread), and joins the helpers when the walk ends. Every file is opened
 * beneath a held fd of ROOT and read into a reused 1 MiB buffer. A regular file reads short
 * only at its end, so a read that returns less than the buffer is the whole
 * file: one read per file. Prints the number of files and bytes read.
 *
 * Built by benches/bench.py with `cc -O2 -pthread`; C, so that no runtime
 * or allocator of kvcr's own sits under the floor. With -DFLOOR_LIB
 * -shared -fPIC it is the in-process floor python/bench/audit_inprocess.py
 * calls through ctypes (kvcr_floor_read below).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK 4096
#define MAX_CHUNKS 65536 /* 268M paths */
#define BUF (1 << 20)

static char **chunks[MAX_CHUNKS];
static atomic_size_t published; /* paths ready to take */
static atomic_size_t next_job;  /* next path a worker takes */
static atomic_int walk_done;
static size_t root_len;
static int root_fd, proc_fd, rule;

struct count {
    size_t files, bytes;
};
static int threads;
static char *walker_buf;
static struct count walker_count;
static void read_one(const char *rel, char *buf, struct count *c);

static void die(const char *what, const char *path) {
    fprintf(stderr, "floor: %s %s: %s\n", what, path, strerror(errno));
    exit(2);
}

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb;
    (void)ftw;
    if (type != FTW_F || !S_ISREG(sb->st_mode)) return 0;
    size_t n = atomic_load_explicit(&published, memory_order_relaxed);
    if (n / CHUNK >= MAX_CHUNKS) die("too many files under", path);
    if (n % CHUNK == 0 && !(chunks[n / CHUNK] = malloc(CHUNK * sizeof(char *)))) die("malloc", path);
    const char *rel = path + root_len;
    while (*rel == '/') rel++;
    if (!(chunks[n / CHUNK][n % CHUNK] = strdup(rel))) die("strdup", path);
    atomic_store_explicit(&published, n + 1, memory_order_release);
    /* Too much waiting (or no helper): the walking thread reads one. */
    size_t backlog = threads == 1 ? 0 : 32 * (size_t)threads;
    for (;;) {
        size_t i = atomic_load(&next_job);
        if (i > n || n + 1 - i <= backlog) break;
        if (atomic_compare_exchange_weak(&next_job, &i, i + 1))
            read_one(chunks[i / CHUNK][i % CHUNK], walker_buf, &walker_count);
    }
    return 0;
}

static void read_one(const char *rel, char *buf, struct count *c) {
    int fd;
    if (rule) {
        int pfd = openat(root_fd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (pfd < 0) die("O_PATH open", rel);
        struct stat st;
        if (fstat(pfd, &st) < 0) die("fstat", rel);
        if (!S_ISREG(st.st_mode)) {
            close(pfd);
            return;
        }
        char name[16];
        snprintf(name, sizeof name, "%d", pfd);
        fd = openat(proc_fd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) die("reopen", rel);
        close(pfd);
    } else {
        fd = openat(root_fd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) die("open", rel);
    }
    for (;;) {
        ssize_t n = read(fd, buf, BUF);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("read", rel);
        }
        c->bytes += (size_t)n;
        if (n < BUF) break;
    }
    c->files++;
    close(fd);
}

static void *worker(void *arg) {
    struct count *c = arg;
    char *buf = c == &walker_count ? walker_buf : malloc(BUF);
    if (!buf) die("malloc", "buffer");
    for (;;) {
        size_t i = atomic_fetch_add(&next_job, 1);
        for (;;) {
            if (i < atomic_load_explicit(&published, memory_order_acquire)) break;
            if (atomic_load(&walk_done) && i >= atomic_load(&published)) {
                if (buf != walker_buf) free(buf); /* the walker's is kept for the next run */
                return NULL;
            }
            sched_yield();
        }
        read_one(chunks[i / CHUNK][i % CHUNK], buf, c);
    }
}

/* Walks ROOT and reads every regular file on `threads` threads (the
 * walking thread included); returns the bytes read, counts the files. */
static size_t run_floor(const char *root, int with_rule, size_t *files) {
    rule = with_rule;
    root_len = strlen(root);
    atomic_store(&published, 0);
    atomic_store(&next_job, 0);
    atomic_store(&walk_done, 0);
    walker_count.files = walker_count.bytes = 0;
    root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) die("open", root);
    /* /proc/self/fd is opened once per process and kept, as kvcr keeps it. */
    if (rule && proc_fd <= 0) {
        proc_fd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (proc_fd < 0) die("open", "/proc/self/fd");
    }
    pthread_t tid[256];
    struct count counts[256] = {{0, 0}};
    if (threads > 256) threads = 256;
    if (!walker_buf && !(walker_buf = malloc(BUF))) die("malloc", "buffer");
    for (int t = 1; t < threads; t++)
        if (pthread_create(&tid[t], NULL, worker, &counts[t])) die("pthread_create", "");
    if (nftw(root, visit, 64, FTW_PHYS) != 0) die("nftw", root);
    atomic_store(&walk_done, 1);
    worker(&walker_count);
    struct count total = walker_count;
    for (int t = 1; t < threads; t++) {
        pthread_join(tid[t], NULL);
        total.files += counts[t].files;
        total.bytes += counts[t].bytes;
    }
    size_t n = atomic_load(&published);
    for (size_t i = 0; i < n; i++) free(chunks[i / CHUNK][i % CHUNK]);
    for (size_t c = 0; c * CHUNK < n; c++) free(chunks[c]);
    close(root_fd);
    *files = total.files;
    return total.bytes;
}

#ifdef FLOOR_LIB
/* The in-process floor of python/bench/audit_inprocess.py (issue #39 §3),
 * called through ctypes: one thread, as kvcr's in-process audit of one
 * group uses (no helper starts for fewer than 16 descriptors). Returns the
 * bytes read; *files gets the number of files. */
long kvcr_floor_read(const char *root, int with_rule, long *files) {
    threads = 1;
    size_t n = 0, bytes = run_floor(root, with_rule, &n);
    *files = (long)n;
    return (long)bytes;
}
#else
int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "plain") && strcmp(argv[1], "rule"))) {
        fprintf(stderr, "usage: floor plain|rule ROOT [THREADS]\n");
        return 2;
    }
    if (argc > 3) threads = atoi(argv[3]);
    if (threads <= 0) {
        cpu_set_t set;
        threads = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    }
    size_t files = 0, bytes = run_floor(argv[2], !strcmp(argv[1], "rule"), &files);
    printf("%zu files, %zu bytes, %d threads\n", files, bytes, threads);
    return 0;
}
#endif
