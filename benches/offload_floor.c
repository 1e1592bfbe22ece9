/* The floor kvcr offload is measured against (docs/bench.md): a tight
 * walker doing what its default pass must do and nothing more: open each
 * directory relative to its parent (O_RDONLY|O_DIRECTORY|O_NOFOLLOW|
 * O_NOATIME), read it with getdents64 in BUF_BYTES batches (the buffer
 * kvcr's walk uses, src/offload/walk.rs), and one
 * statx(dirfd, name, AT_SYMLINK_NOFOLLOW, TYPE|SIZE|MTIME) per entry,
 * descending into directories. Prints entries and total bytes.
 *
 * Every argument is a root. With FLOOR_THREADS=N above 1 (the environment;
 * default 1, as kvcr's --threads N) the work is shared the way kvcr shares
 * it, only more freely: any thread lists a
 * directory (getdents64, one batch per buffer) or statx-es a batch of
 * names, and a directory found is listed by whichever thread is free.
 * It keeps no names, builds no paths and allocates only the batches.
 * Build: cc -O2 -pthread -o offload_floor benches/offload_floor.c */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BUF_BYTES (64 * 1024)

struct linux_dirent64 {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static atomic_ullong entries, bytes;
static atomic_int failed;

/* A directory: its descriptor, closed when its last batch is done. */
struct dir {
    int fd;
    atomic_int refs;
};

static void dir_put(struct dir *d) {
    if (atomic_fetch_sub(&d->refs, 1) == 1) {
        close(d->fd);
        free(d);
    }
}

/* A unit of work: a directory to list (names == NULL) or a getdents
 * buffer of names to statx. */
struct work {
    struct work *next;
    struct dir *dir;
    long n;
    char *names;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct work *head, *tail;
static long pending; /* queued or running */

static void push(struct work *w) {
    pthread_mutex_lock(&mu);
    w->next = NULL;
    if (tail) tail->next = w; else head = w;
    tail = w;
    pending++;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static void done(void) {
    pthread_mutex_lock(&mu);
    if (--pending == 0) pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static struct dir *open_dir(int parent, const char *name) {
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC);
    if (fd < 0) fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) { atomic_store(&failed, 1); return NULL; }
    struct dir *d = malloc(sizeof *d);
    d->fd = fd;
    atomic_init(&d->refs, 1);
    return d;
}

static void stat_names(struct dir *dir, const char *buf, long n, int threads);

static void list_dir(struct dir *dir, int threads) {
    char *buf = malloc(BUF_BYTES);
    for (;;) {
        long n = syscall(SYS_getdents64, dir->fd, buf, BUF_BYTES);
        if (n < 0) { atomic_store(&failed, 1); break; }
        if (n == 0) break;
        if (threads > 1) {
            struct work *w = malloc(sizeof *w);
            w->dir = dir;
            w->n = n;
            w->names = buf;
            atomic_fetch_add(&dir->refs, 1);
            push(w);
            buf = malloc(BUF_BYTES);
        } else {
            stat_names(dir, buf, n, threads);
        }
    }
    free(buf);
}

static void stat_names(struct dir *dir, const char *buf, long n, int threads) {
    unsigned long long e = 0, b = 0;
    for (long off = 0; off < n;) {
        const struct linux_dirent64 *d = (const struct linux_dirent64 *)(buf + off);
        off += d->d_reclen;
        if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..")) continue;
        struct statx sx;
        e++;
        if (statx(dir->fd, d->d_name, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_SIZE | STATX_MTIME, &sx))
            continue;
        b += sx.stx_size;
        if (S_ISDIR(sx.stx_mode)) {
            struct dir *sub = open_dir(dir->fd, d->d_name);
            if (!sub) continue;
            if (threads > 1) {
                struct work *w = malloc(sizeof *w);
                w->dir = sub;
                w->n = 0;
                w->names = NULL;
                push(w);
            } else {
                list_dir(sub, threads);
                dir_put(sub);
            }
        }
    }
    atomic_fetch_add(&entries, e);
    atomic_fetch_add(&bytes, b);
}

static int nthreads;

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (!head && pending > 0) pthread_cond_wait(&cv, &mu);
        if (!head) { pthread_mutex_unlock(&mu); return NULL; }
        struct work *w = head;
        head = w->next;
        if (!head) tail = NULL;
        pthread_mutex_unlock(&mu);
        if (w->names) {
            stat_names(w->dir, w->names, w->n, nthreads);
            free(w->names);
        } else {
            list_dir(w->dir, nthreads);
        }
        dir_put(w->dir);
        free(w);
        done();
    }
}

int main(int argc, char **argv) {
    const char *t = getenv("FLOOR_THREADS");
    nthreads = t ? atoi(t) : 1;
    if (nthreads < 1) nthreads = 1;
    for (int i = 1; i < argc; i++) {
        struct dir *d = open_dir(AT_FDCWD, argv[i]);
        if (!d) { perror(argv[i]); return 2; }
        if (nthreads == 1) {
            list_dir(d, 1);
            dir_put(d);
            continue;
        }
        struct work *w = malloc(sizeof *w);
        w->dir = d;
        w->n = 0;
        w->names = NULL;
        push(w);
        pthread_t th[nthreads];
        for (int k = 0; k < nthreads; k++) pthread_create(&th[k], NULL, worker, NULL);
        for (int k = 0; k < nthreads; k++) pthread_join(th[k], NULL);
    }
    if (atomic_load(&failed)) { fprintf(stderr, "some directory could not be read\n"); return 2; }
    printf("%llu entries, %llu bytes\n", (unsigned long long)entries, (unsigned long long)bytes);
    return 0;
}
