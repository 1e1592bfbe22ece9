/*
 * A KV-cache owner for the fake-driver tests, exporting through the fake
 * driver (linked against it) the way a real owner does: each argument
 *   DEV:SIZE[:SEED]  cuMemCreate of SIZE bytes on device DEV (posix_fd and
 *                    fabric shareable), filled with the gpu-proof pattern
 *                    of SEED when one is given (else zeros), exported with
 *                    cuMemExportToShareableHandle(POSIX_FILE_DESCRIPTOR):
 *                    prints the fd;
 *   dup:K            prints a dup() of the Kth (0-based) printed fd: two fds
 *                    of one open file;
 *   export:K         exports the allocation behind the Kth entry once more:
 *                    a second, distinct file of the same allocation;
 *   fabric:K         exports the allocation behind the Kth entry as a
 *                    fabric handle: prints its 128 hex digits.
 * Everything printed goes on one line, then the owner lets any process take
 * its fds with pidfd_getfd (PR_SET_PTRACER_ANY) and waits: SIGUSR1 makes it
 * drop everything it holds (unmap, cuMemRelease of every handle, close
 * every exported fd) and exit 0; SIGTERM ends it.
 * Needs FAKECUDA_GPUS and FAKECUDA_STATE, as the fake does.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct { int type; int id; } CUmemLocation;
typedef struct {
    int type;
    int requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    unsigned char allocFlags[8];
} CUmemAllocationProp;
typedef struct { CUmemLocation location; int flags; } CUmemAccessDesc;
typedef struct { unsigned char data[64]; } CUmemFabricHandle;
typedef void *CUcontext;

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(int *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
CUresult cuMemExportToShareableHandle(void *, CUmemGenericAllocationHandle, int, unsigned long long);
CUresult cuMemAddressReserve(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemAddressFree(CUdeviceptr, size_t);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemRelease(CUmemGenericAllocationHandle);

#define N 256
static CUmemGenericAllocationHandle handles[N];
static int alloc_of[N], fds[N], nfds;
static int nallocs;

static void die(const char *what, CUresult r) {
    fprintf(stderr, "owner: %s: %d\n", what, r);
    exit(1);
}

/* The pattern of scripts/gpu-proof-owner.c. */
static unsigned char pattern(unsigned long long i, int seed) {
    return (unsigned char)(((i * 2654435761ull) >> 13 ^ (unsigned long long)seed) & 0xff);
}

static void fill(CUmemGenericAllocationHandle h, int dev, size_t size, int seed) {
    CUdeviceptr va = 0;
    CUresult r;
    CUcontext ctx;
    int d;
    if ((r = cuDeviceGet(&d, dev)) || (r = cuDevicePrimaryCtxRetain(&ctx, d)) || (r = cuCtxSetCurrent(ctx)))
        die("context", r);
    if ((r = cuMemAddressReserve(&va, size, 0, 0, 0)) || (r = cuMemMap(va, size, 0, h, 0))) die("map", r);
    CUmemAccessDesc a = {{1, dev}, 3};
    if ((r = cuMemSetAccess(va, size, &a, 1))) die("access", r);
    unsigned char *buf = malloc(size);
    if (!buf) die("malloc", 0);
    for (size_t i = 0; i < size; i++) buf[i] = pattern(i, seed);
    if ((r = cuMemcpyHtoD_v2(va, buf, size))) die("copy", r);
    free(buf);
    cuMemUnmap(va, size);
    cuMemAddressFree(va, size);
}

int main(int argc, char **argv) {
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    CUresult r = cuInit(0);
    if (r) die("cuInit", r);
    for (int i = 1; i < argc && nfds < N; i++) {
        const char *a = argv[i];
        int k = -1, fd = -1;
        const char *sep = i > 1 ? " " : "";
        if (sscanf(a, "dup:%d", &k) == 1 || sscanf(a, "export:%d", &k) == 1 ||
            sscanf(a, "fabric:%d", &k) == 1) {
            if (k < 0 || k >= nfds) die("no such entry", k);
            if (a[0] == 'd') {
                fd = dup(fds[k]);
            } else if (a[0] == 'e') {
                if ((r = cuMemExportToShareableHandle(&fd, handles[alloc_of[k]], 1, 0))) die("export", r);
            } else {
                CUmemFabricHandle fh;
                if ((r = cuMemExportToShareableHandle(&fh, handles[alloc_of[k]], 8, 0))) die("fabric", r);
                printf("%s", sep);
                for (int b = 0; b < 64; b++) printf("%02x", fh.data[b]);
                alloc_of[nfds] = alloc_of[k];
                fds[nfds++] = -1;
                continue;
            }
            if (fd < 0) die("dup", fd);
            alloc_of[nfds] = alloc_of[k];
        } else {
            int dev = 0, seed = -1;
            long long size = 0;
            if (sscanf(a, "%d:%lld:%d", &dev, &size, &seed) < 2) die("bad argument", i);
            CUmemAllocationProp p;
            memset(&p, 0, sizeof p);
            p.type = 1;
            p.requestedHandleTypes = 1 | 8;
            p.location.type = 1;
            p.location.id = dev;
            if ((r = cuMemCreate(&handles[nallocs], (size_t)size, &p, 0))) die("cuMemCreate", r);
            if (seed >= 0) fill(handles[nallocs], dev, (size_t)size, seed);
            if ((r = cuMemExportToShareableHandle(&fd, handles[nallocs], 1, 0))) die("export", r);
            alloc_of[nfds] = nallocs++;
        }
        fds[nfds++] = fd;
        printf("%s%d", sep, fd);
    }
    printf("\n");
    fflush(stdout);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0) continue;
        if (sig == SIGUSR1) {
            /* Drop every reference this process holds, then go. */
            for (int i = 0; i < nallocs; i++) cuMemRelease(handles[i]);
            for (int i = 0; i < nfds; i++)
                if (fds[i] >= 0) close(fds[i]);
            return 0;
        }
        return 0;
    }
}
