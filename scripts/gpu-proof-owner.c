/*
 * gpu-proof-owner: the KV-cache owner and the throwaway importer that
 * scripts/gpu-proof.sh drives (docs/import.md, "The GPU proof").
 *
 * Plain C against the CUDA driver API, loaded with dlopen("libcuda.so.1"):
 * no CUDA headers, no toolkit, no Rust. Built by scripts/gpu-proof-build.sh
 * here (to carry) or by gpu-proof.sh on the GPU machine with its `cc`:
 *     cc -O2 -Wall -Wextra -o gpu-proof-owner scripts/gpu-proof-owner.c -ldl
 * The cuda.h types it uses are declared below with their CUDA 12/13 layouts.
 *
 *   gpu-proof-owner env
 *       one JSON object: driver version, which libcuda was loaded, and per
 *       device its name, UUID, compute mode and VMM / posix_fd / fabric
 *       handle support.
 *   gpu-proof-owner serve DIR SIZE_MIB
 *       on device 0: a cuMemAlloc buffer exported with cuIpcGetMemHandle, a
 *       VMM allocation (cuMemCreate) exported twice as a posix_fd, a VMM
 *       fabric allocation where the device supports one, a plain memfd (not
 *       GPU memory) and the number of an fd it closed; every allocation is
 *       filled with its own pattern (below). Writes DIR/owner.json, then
 *       waits: SIGUSR2 re-reads every allocation it still maps and writes
 *       DIR/check.json; SIGUSR1 drops every reference it has to the hold
 *       allocation (a third VMM allocation, exported once as a posix_fd for
 *       the hold step: unmap, free the range, cuMemRelease, close its fd)
 *       and to the fabric one, and writes DIR/dropped.json; SIGTERM/SIGINT
 *       end it.
 *       It allows any process to ptrace it (PR_SET_PTRACER_ANY), for
 *       pidfd_getfd under Yama ptrace_scope 1.
 *   gpu-proof-owner read ipc|fabric HEX SIZE SEED
 *       a second importer of an IPC or fabric handle (fabric mapped
 *       read-only): compares the sampled pages with the pattern; one JSON
 *       object on stdout.
 *   gpu-proof-owner twice IPC_HEX PID FD1 FD2
 *       the driver's own answers, outside kvcr: the same IPC handle opened
 *       twice in one context (same pointer? does one close leave it
 *       readable?) and one VMM allocation imported through two exported
 *       fds: both handles (the same?), each fd's file type and kcmp of the
 *       two (0 is one open file), and each handle's BUFFER_ID and
 *       MEMORY_BLOCK_ID once mapped (with the status of each query); one
 *       JSON object on stdout.
 *   gpu-proof-owner pair PID FD1 FD2
 *       the control: two distinct allocations (two exported fds of process
 *       PID) imported together as kvcr does (both imported, then both
 *       mapped), each one's MEMORY_BLOCK_ID asked while both are mapped;
 *       one JSON object: both statuses, handles and ids, and whether the
 *       ids tell the two apart (distinct_ids).
 *   gpu-proof-owner take SOCKET SEED
 *       a new engine during a `kvcr import --hold`: connects to the hold's
 *       hand-over socket (the ready file's hand_over), receives one message
 *       per posix_fd allocation with its fd (SCM_RIGHTS), imports each, maps
 *       it read-only and compares the sampled pages of offset_bytes +
 *       size_bytes with the pattern; one JSON object on stdout: the fd's
 *       file type, the read and the allocation's own description.
 *   gpu-proof-owner meminfo
 *       cuMemGetInfo of device 0 (free, total, used), one JSON object.
 *   gpu-proof-owner probe PID FD SIZE SEED [write]
 *       a throwaway importer: takes FD from process PID (pidfd_getfd),
 *       imports it, maps it read-only, reads cuMemGetAccess back, compares
 *       the sampled pages with the pattern and, with `write`, tries to write
 *       through the read-only mapping; one JSON object on stdout.
 *
 * Pattern: byte i of an allocation with seed s is
 *     ((i * 2654435761) >> 13 ^ s) & 0xff        (64-bit unsigned i)
 * Sampled pages: 16 pages of 4096 bytes, page k at
 *     floor(k * (SIZE - 4096) / 15)              (the first and the last)
 * Exit status: 0 done, 1 a CUDA call failed (named on stderr), 2 usage.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef void *CUcontext;
typedef struct { unsigned char bytes[16]; } CUuuid;
typedef struct { unsigned char reserved[64]; } CUipcMemHandle;
typedef struct { unsigned char data[64]; } CUmemFabricHandle;
typedef struct { int type; int id; } CUmemLocation;
typedef struct {
    int type;
    int requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;
typedef struct { CUmemLocation location; int flags; } CUmemAccessDesc;
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");

#define LOC_DEVICE 1
#define ALLOC_PINNED 1
#define H_POSIX_FD 1
#define H_FABRIC 8
#define PROT_R 1
#define PROT_RW 3
#define ATTR_COMPUTE_MODE 20
#define ATTR_VMM 102
#define ATTR_POSIX_FD 103
#define ATTR_FABRIC 128
#define PAGE 4096ull
#define PAGES 16ull

/* ---- the driver, resolved by name ----------------------------------- */
static void *lib;
static CUresult (*p_cuInit)(unsigned);
static CUresult (*p_cuDriverGetVersion)(int *);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetName)(char *, int, CUdevice);
static CUresult (*p_cuDeviceGetUuid)(CUuuid *, CUdevice);
static CUresult (*p_cuDeviceGetAttribute)(int *, int, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuCtxSynchronize)(void);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuIpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
static CUresult (*p_cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*p_cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static CUresult (*p_cuMemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, int);
static CUresult (*p_cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                                 unsigned long long);
static CUresult (*p_cuMemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, int,
                                                  unsigned long long);
static CUresult (*p_cuMemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *, int);
static CUresult (*p_cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*p_cuMemAddressFree)(CUdeviceptr, size_t);
static CUresult (*p_cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
static CUresult (*p_cuMemUnmap)(CUdeviceptr, size_t);
static CUresult (*p_cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult (*p_cuMemGetAccess)(unsigned long long *, const CUmemLocation *, CUdeviceptr); /* optional */
static CUresult (*p_cuMemRelease)(CUmemGenericAllocationHandle);
static CUresult (*p_cuGetErrorName)(CUresult, const char **);
static CUresult (*p_cuIpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle, unsigned);
static CUresult (*p_cuIpcCloseMemHandle)(CUdeviceptr);
static CUresult (*p_cuMemGetInfo)(size_t *, size_t *); /* optional */
static CUresult (*p_cuPointerGetAttribute)(void *, int, CUdeviceptr); /* optional */

static const char *missing_sym;

static void *sym(const char *name, int required) {
    void *p = dlsym(lib, name);
    if (!p && required && !missing_sym) missing_sym = name;
    return p;
}

#define RESOLVE(var, name) *(void **)(&var) = sym(name, 1)

static int load(void) {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "gpu-proof-owner: cannot load libcuda.so.1: %s\n", dlerror());
        return -1;
    }
    RESOLVE(p_cuInit, "cuInit");
    RESOLVE(p_cuDriverGetVersion, "cuDriverGetVersion");
    RESOLVE(p_cuDeviceGetCount, "cuDeviceGetCount");
    RESOLVE(p_cuDeviceGet, "cuDeviceGet");
    RESOLVE(p_cuDeviceGetName, "cuDeviceGetName");
    /* _v2 where the driver has it (kvcr resolves the same), else the plain name. */
    *(void **)(&p_cuDeviceGetUuid) = sym("cuDeviceGetUuid_v2", 0);
    if (!p_cuDeviceGetUuid) RESOLVE(p_cuDeviceGetUuid, "cuDeviceGetUuid");
    RESOLVE(p_cuDeviceGetAttribute, "cuDeviceGetAttribute");
    RESOLVE(p_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    RESOLVE(p_cuCtxSetCurrent, "cuCtxSetCurrent");
    *(void **)(&p_cuCtxSynchronize) = sym("cuCtxSynchronize", 0); /* optional */
    RESOLVE(p_cuMemAlloc, "cuMemAlloc_v2");
    RESOLVE(p_cuMemFree, "cuMemFree_v2");
    RESOLVE(p_cuIpcGetMemHandle, "cuIpcGetMemHandle");
    RESOLVE(p_cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    RESOLVE(p_cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    RESOLVE(p_cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity");
    RESOLVE(p_cuMemCreate, "cuMemCreate");
    RESOLVE(p_cuMemExportToShareableHandle, "cuMemExportToShareableHandle");
    RESOLVE(p_cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle");
    RESOLVE(p_cuMemAddressReserve, "cuMemAddressReserve");
    RESOLVE(p_cuMemAddressFree, "cuMemAddressFree");
    RESOLVE(p_cuMemMap, "cuMemMap");
    RESOLVE(p_cuMemUnmap, "cuMemUnmap");
    RESOLVE(p_cuMemSetAccess, "cuMemSetAccess");
    RESOLVE(p_cuMemRelease, "cuMemRelease");
    RESOLVE(p_cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2");
    RESOLVE(p_cuIpcCloseMemHandle, "cuIpcCloseMemHandle");
    *(void **)(&p_cuMemGetAccess) = sym("cuMemGetAccess", 0);
    *(void **)(&p_cuGetErrorName) = sym("cuGetErrorName", 0);
    *(void **)(&p_cuMemGetInfo) = sym("cuMemGetInfo_v2", 0);
    *(void **)(&p_cuPointerGetAttribute) = sym("cuPointerGetAttribute", 0);
    if (missing_sym) {
        fprintf(stderr, "gpu-proof-owner: libcuda has no %s\n", missing_sym);
        return -1;
    }
    return 0;
}

static const char *errname(CUresult r) {
    const char *s = NULL;
    if (p_cuGetErrorName && p_cuGetErrorName(r, &s) == 0 && s) return s;
    return "unknown";
}

static char last_error[512];

static int ck(CUresult r, const char *call) {
    if (r == 0) return 0;
    snprintf(last_error, sizeof last_error, "%s: %s (%d)", call, errname(r), r);
    fprintf(stderr, "gpu-proof-owner: %s\n", last_error);
    return -1;
}

#define CK(call) ck((call), #call)

/* JSON string content: the text is ours or the driver's (names, paths). */
static void jstr(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void hex(const unsigned char *b, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
    out[2 * n] = 0;
}

static void uuid_text(const CUuuid *u, char *out) {
    const unsigned char *b = u->bytes;
    sprintf(out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
            b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static unsigned char pattern(unsigned long long i, int seed) {
    return (unsigned char)(((i * 2654435761ull) >> 13 ^ (unsigned long long)seed) & 0xff);
}

static unsigned long long page_at(unsigned long long k, unsigned long long size) {
    return k * (size - PAGE) / (PAGES - 1);
}

static CUdevice dev0;
static CUcontext ctx0;

static int init_device(void) {
    if (CK(p_cuInit(0))) return -1;
    if (CK(p_cuDeviceGet(&dev0, 0))) return -1;
    if (CK(p_cuDevicePrimaryCtxRetain(&ctx0, dev0))) return -1;
    return CK(p_cuCtxSetCurrent(ctx0));
}

static CUmemAllocationProp vmm_prop(int types) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = ALLOC_PINNED;
    p.requestedHandleTypes = types;
    p.location.type = LOC_DEVICE;
    p.location.id = 0;
    return p;
}

static int fill(CUdeviceptr d, unsigned long long size, int seed) {
    size_t chunk = 1 << 20;
    unsigned char *buf = malloc(chunk);
    if (!buf) return -1;
    for (unsigned long long off = 0; off < size; off += chunk) {
        size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
        for (size_t i = 0; i < n; i++) buf[i] = pattern(off + i, seed);
        if (CK(p_cuMemcpyHtoD(d + off, buf, n))) { free(buf); return -1; }
    }
    free(buf);
    return 0;
}

/* 0 when every sampled page holds the pattern; else the first bad offset
 * + 1 in *bad, or -1 with last_error set when a copy failed. */
static int sample(CUdeviceptr d, unsigned long long size, int seed, long long *bad) {
    unsigned char buf[PAGE];
    *bad = -1;
    for (unsigned long long k = 0; k < PAGES; k++) {
        unsigned long long off = size <= PAGE ? 0 : page_at(k, size);
        size_t n = size < PAGE ? (size_t)size : PAGE;
        if (CK(p_cuMemcpyDtoH(buf, d + off, n))) return -1;
        for (size_t i = 0; i < n; i++)
            if (buf[i] != pattern(off + i, seed)) {
                *bad = (long long)(off + i);
                return 0;
            }
    }
    return 0;
}

/* ---- env -------------------------------------------------------------- */
static int cmd_env(void) {
    Dl_info info;
    char where[4096] = "", real[4096] = "";
    if (dladdr((void *)p_cuInit, &info) && info.dli_fname) {
        snprintf(where, sizeof where, "%s", info.dli_fname);
        if (!realpath(where, real)) real[0] = 0;
    }
    int version = -1, count = -1;
    CUresult rv = p_cuDriverGetVersion(&version);
    CUresult ri = p_cuInit(0);
    if (ri == 0) p_cuDeviceGetCount(&count);
    printf("{\"libcuda\": ");
    jstr(stdout, where);
    printf(", \"libcuda_realpath\": ");
    jstr(stdout, real);
    printf(", \"driver_version\": %d, \"driver_version_status\": %d, \"cuInit\": %d, \"cuInit_name\": ", version,
           rv, ri);
    jstr(stdout, errname(ri));
    printf(", \"cuMemGetAccess\": %s, \"devices\": [", p_cuMemGetAccess ? "true" : "false");
    for (int i = 0; i < count; i++) {
        CUdevice d;
        char name[256] = "", uuid[64] = "";
        CUuuid u;
        int cm = -1, vmm = -1, pfd = -1, fab = -1;
        if (p_cuDeviceGet(&d, i) == 0) {
            p_cuDeviceGetName(name, sizeof name, d);
            if (p_cuDeviceGetUuid(&u, d) == 0) uuid_text(&u, uuid);
            p_cuDeviceGetAttribute(&cm, ATTR_COMPUTE_MODE, d);
            p_cuDeviceGetAttribute(&vmm, ATTR_VMM, d);
            p_cuDeviceGetAttribute(&pfd, ATTR_POSIX_FD, d);
            p_cuDeviceGetAttribute(&fab, ATTR_FABRIC, d);
        }
        printf("%s{\"ordinal\": %d, \"name\": ", i ? ", " : "", i);
        jstr(stdout, name);
        printf(", \"uuid\": ");
        jstr(stdout, uuid);
        printf(", \"compute_mode\": %d, \"vmm\": %d, \"posix_fd\": %d, \"fabric\": %d}", cm, vmm, pfd, fab);
    }
    printf("]}\n");
    return 0;
}

/* ---- serve ------------------------------------------------------------ */
struct vmm {
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    unsigned long long size;
    int seed, mapped;
};

static struct vmm posix_mem, fabric_mem, hold_mem;
static int hold_fd = -1;
static CUdeviceptr ipc_ptr;
static unsigned long long ipc_size;
static const char *dir;

static int vmm_create(struct vmm *m, int types, unsigned long long size, int seed) {
    CUmemAllocationProp p = vmm_prop(types);
    size_t g = 0;
    if (CK(p_cuMemGetAllocationGranularity(&g, &p, 0))) return -1;
    m->size = (size + g - 1) / g * g;
    m->seed = seed;
    if (CK(p_cuMemCreate(&m->h, m->size, &p, 0))) return -1;
    if (CK(p_cuMemAddressReserve(&m->va, m->size, 0, 0, 0))) return -1;
    if (CK(p_cuMemMap(m->va, m->size, 0, m->h, 0))) return -1;
    CUmemAccessDesc a = {{LOC_DEVICE, 0}, PROT_RW};
    if (CK(p_cuMemSetAccess(m->va, m->size, &a, 1))) return -1;
    m->mapped = 1;
    return fill(m->va, m->size, seed);
}

static void vmm_drop(struct vmm *m) {
    if (!m->mapped) return;
    CK(p_cuMemUnmap(m->va, m->size));
    CK(p_cuMemAddressFree(m->va, m->size));
    CK(p_cuMemRelease(m->h));
    m->mapped = 0;
}

static FILE *open_out(const char *name, char *final, size_t n, char *tmp, size_t tn) {
    snprintf(final, n, "%s/%s", dir, name);
    snprintf(tmp, tn, "%s/.%s.tmp", dir, name);
    return fopen(tmp, "w");
}

static void check_one(FILE *f, const char *name, CUdeviceptr d, unsigned long long size, int seed, int live,
                      int *first) {
    long long bad = -1;
    fprintf(f, "%s\"%s\": ", *first ? "" : ", ", name);
    *first = 0;
    if (!live) {
        fprintf(f, "\"dropped\"");
        return;
    }
    if (sample(d, size, seed, &bad) != 0) {
        jstr(f, last_error);
        return;
    }
    if (bad >= 0) fprintf(f, "\"differs at byte %lld\"", bad);
    else fprintf(f, "\"same\"");
}

static int write_check(void) {
    char fin[4096], tmp[4096];
    FILE *f = open_out("check.json", fin, sizeof fin, tmp, sizeof tmp);
    if (!f) return -1;
    int first = 1;
    fprintf(f, "{");
    check_one(f, "ipc", ipc_ptr, ipc_size, 0x11, 1, &first);
    check_one(f, "vmm", posix_mem.va, posix_mem.size, posix_mem.seed, posix_mem.mapped, &first);
    if (fabric_mem.size) check_one(f, "fabric", fabric_mem.va, fabric_mem.size, fabric_mem.seed, fabric_mem.mapped, &first);
    fprintf(f, "}\n");
    fclose(f);
    return rename(tmp, fin);
}

static int cmd_serve(unsigned long long mib) {
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    /* Never outlive the proof that started it (SIGTERM is handled below). */
    prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    if (init_device()) return 1;
    unsigned long long size = mib << 20;
    CUuuid u;
    char uuid[64], ipc_hex[129] = "", fab_hex[129] = "", fab_err[512] = "";
    if (CK(p_cuDeviceGetUuid(&u, dev0))) return 1;
    uuid_text(&u, uuid);
    /* cuda_ipc: a legacy allocation. */
    ipc_size = size;
    if (CK(p_cuMemAlloc(&ipc_ptr, size)) || fill(ipc_ptr, size, 0x11)) return 1;
    CUipcMemHandle ih;
    if (CK(p_cuIpcGetMemHandle(&ih, ipc_ptr))) return 1;
    hex(ih.reserved, 64, ipc_hex);
    /* posix_fd: one VMM allocation, exported twice. */
    if (vmm_create(&posix_mem, H_POSIX_FD, size, 0x22)) return 1;
    int fd1 = -1, fd2 = -1, gone = -1;
    if (CK(p_cuMemExportToShareableHandle(&fd1, posix_mem.h, H_POSIX_FD, 0))) return 1;
    if (CK(p_cuMemExportToShareableHandle(&fd2, posix_mem.h, H_POSIX_FD, 0))) return 1;
    /* posix_fd for the hold step: one more VMM allocation, exported once;
     * SIGUSR1 drops it and closes that fd (the others stay for later steps). */
    if (vmm_create(&hold_mem, H_POSIX_FD, size, 0x44)) return 1;
    if (CK(p_cuMemExportToShareableHandle(&hold_fd, hold_mem.h, H_POSIX_FD, 0))) return 1;
    /* An fd number the owner closed: far above anything it opens later. */
    if (dup2(fd1, 900) == 900) {
        close(900);
        gone = 900;
    }
    /* fabric, where the device says it can. */
    int fab_attr = -1;
    p_cuDeviceGetAttribute(&fab_attr, ATTR_FABRIC, dev0);
    if (fab_attr == 1) {
        if (vmm_create(&fabric_mem, H_FABRIC, size, 0x33) == 0) {
            CUmemFabricHandle fh;
            if (CK(p_cuMemExportToShareableHandle(&fh, fabric_mem.h, H_FABRIC, 0)) == 0) hex(fh.data, 64, fab_hex);
            else snprintf(fab_err, sizeof fab_err, "%s", last_error);
        } else {
            snprintf(fab_err, sizeof fab_err, "%s", last_error);
        }
        if (!fab_hex[0] && fabric_mem.mapped) vmm_drop(&fabric_mem);
        if (!fab_hex[0]) fabric_mem.size = 0;
    } else {
        snprintf(fab_err, sizeof fab_err, "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED is %d", fab_attr);
    }
    /* Not GPU memory at all. */
    int plain = memfd_create("gpu-proof-plain", 0);
    if (plain < 0 || ftruncate(plain, (off_t)size) != 0) {
        perror("gpu-proof-owner: memfd");
        return 1;
    }
    char fin[4096], tmp[4096];
    FILE *f = open_out("owner.json", fin, sizeof fin, tmp, sizeof tmp);
    if (!f) {
        perror("gpu-proof-owner: owner.json");
        return 1;
    }
    fprintf(f, "{\"pid\": %d, \"device\": 0, \"gpu_uuid\": \"%s\", \"size\": %llu,\n", (int)getpid(), uuid, size);
    fprintf(f, " \"ipc\": {\"hex\": \"%s\", \"size\": %llu, \"seed\": %d},\n", ipc_hex, ipc_size, 0x11);
    fprintf(f, " \"vmm\": {\"fd\": %d, \"fd2\": %d, \"size\": %llu, \"seed\": %d},\n", fd1, fd2, posix_mem.size,
            posix_mem.seed);
    fprintf(f, " \"hold\": {\"fd\": %d, \"size\": %llu, \"seed\": %d},\n", hold_fd, hold_mem.size, hold_mem.seed);
    if (fab_hex[0])
        fprintf(f, " \"fabric\": {\"hex\": \"%s\", \"size\": %llu, \"seed\": %d},\n", fab_hex, fabric_mem.size,
                fabric_mem.seed);
    else {
        fprintf(f, " \"fabric\": null, \"fabric_error\": ");
        jstr(f, fab_err);
        fprintf(f, ",\n");
    }
    fprintf(f, " \"plain_memfd\": %d, \"closed_fd\": %d}\n", plain, gone);
    fclose(f);
    if (rename(tmp, fin) != 0) return 1;
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0) continue;
        if (sig == SIGUSR2) {
            write_check();
        } else if (sig == SIGUSR1) {
            /* The hold step: every reference of this process to the hold
             * allocation (mapping, handle, its exported fd) and to the
             * fabric one goes; only kvcr's keep them. */
            vmm_drop(&hold_mem);
            vmm_drop(&fabric_mem);
            int closed = hold_fd >= 0 && close(hold_fd) == 0;
            hold_fd = -1;
            FILE *d = open_out("dropped.json", fin, sizeof fin, tmp, sizeof tmp);
            if (d) {
                fprintf(d, "{\"dropped\": [\"hold\"%s], \"closed_fd\": %s, \"error\": ",
                        fabric_mem.size ? ", \"fabric\"" : "", closed ? "true" : "false");
                jstr(d, last_error);
                fprintf(d, "}\n");
                fclose(d);
                rename(tmp, fin);
            }
        } else {
            vmm_drop(&posix_mem);
            vmm_drop(&hold_mem);
            vmm_drop(&fabric_mem);
            p_cuMemFree(ipc_ptr);
            return 0;
        }
    }
}

/* ---- probe ------------------------------------------------------------ */
static int cmd_probe(int pid, int fd, unsigned long long size, int seed, int write) {
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int mine = pidfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
    if (mine < 0) {
        printf("{\"error\": ");
        char e[256];
        snprintf(e, sizeof e, "pidfd_getfd of fd %d in pid %d: %s", fd, pid, strerror(errno));
        jstr(stdout, e);
        printf("}\n");
        return 1;
    }
    if (init_device()) goto fail;
    CUmemGenericAllocationHandle h;
    if (CK(p_cuMemImportFromShareableHandle(&h, (void *)(intptr_t)mine, H_POSIX_FD))) goto fail;
    close(mine);
    CUmemAllocationProp p = vmm_prop(H_POSIX_FD);
    size_t g = 0;
    CUdeviceptr va = 0;
    if (CK(p_cuMemGetAllocationGranularity(&g, &p, 0))) goto fail;
    size = (size + g - 1) / g * g;
    if (CK(p_cuMemAddressReserve(&va, size, 0, 0, 0))) goto fail;
    if (CK(p_cuMemMap(va, size, 0, h, 0))) goto fail;
    CUmemAccessDesc a = {{LOC_DEVICE, 0}, PROT_R};
    if (CK(p_cuMemSetAccess(va, size, &a, 1))) goto fail;
    long long access = -1;
    int access_rc = -1;
    if (p_cuMemGetAccess) {
        unsigned long long fl = 0;
        CUmemLocation loc = {LOC_DEVICE, 0};
        access_rc = p_cuMemGetAccess(&fl, &loc, va);
        if (access_rc == 0) access = (long long)fl;
    }
    long long bad = -1;
    if (sample(va, size, seed, &bad) != 0) goto fail;
    int write_rc = -1, sync_rc = -1;
    if (write) {
        unsigned char junk[PAGE];
        memset(junk, 0xee, sizeof junk);
        write_rc = p_cuMemcpyHtoD(va, junk, sizeof junk);
        sync_rc = p_cuCtxSynchronize ? p_cuCtxSynchronize() : -2;
    }
    printf("{\"read\": \"%s\", \"first_bad\": %lld, \"access_flags\": %lld, \"cuMemGetAccess\": %s, "
           "\"access_rc\": %d, \"write_rc\": %d, \"write_name\": ",
           bad < 0 ? "same" : "differs", bad, access, p_cuMemGetAccess ? "true" : "false", access_rc, write_rc);
    jstr(stdout, write ? errname(write_rc) : "");
    printf(", \"sync_rc\": %d}\n", sync_rc);
    /* A faulted context refuses these; the process exits right after. */
    p_cuMemUnmap(va, size);
    p_cuMemAddressFree(va, size);
    p_cuMemRelease(h);
    return 0;
fail:
    printf("{\"error\": ");
    jstr(stdout, last_error);
    printf("}\n");
    return 1;
}

/* ---- take: a new engine, from a hold's hand-over socket --------------- */
static const char *file_type(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return "unknown";
    if (S_ISREG(st.st_mode)) return "regular";
    if (S_ISCHR(st.st_mode)) return "character device";
    if (S_ISSOCK(st.st_mode)) return "socket";
    if (S_ISFIFO(st.st_mode)) return "fifo";
    return "other";
}

/* The integer after "KEY": in a flat JSON object; -1 when absent. */
static long long json_int(const char *msg, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(msg, k);
    return p ? strtoll(p + strlen(k), NULL, 10) : -1;
}

static int cmd_take(const char *path, int seed) {
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (s < 0 || strlen(path) >= sizeof a.sun_path) {
        printf("{\"error\": \"no socket for %s\"}\n", path);
        return 1;
    }
    memcpy(a.sun_path, path, strlen(path));
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        char e[512];
        snprintf(e, sizeof e, "connect %s: %s", path, strerror(errno));
        printf("{\"error\": ");
        jstr(stdout, e);
        printf("}\n");
        return 1;
    }
    if (init_device()) {
        printf("{\"error\": ");
        jstr(stdout, last_error);
        printf("}\n");
        return 1;
    }
    printf("{\"items\": [");
    int n = 0, bad = 0;
    for (;;) {
        char msg[4096];
        union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } c;
        struct iovec io = {msg, sizeof msg - 1};
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = &io;
        m.msg_iovlen = 1;
        m.msg_control = c.b;
        m.msg_controllen = sizeof c.b;
        ssize_t got = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
        if (got <= 0) break;
        msg[got] = 0;
        int fd = -1;
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) memcpy(&fd, CMSG_DATA(h), sizeof fd);
        long long size = json_int(msg, "size_bytes"), off = json_int(msg, "offset_bytes");
        printf("%s{\"message\": %s, \"fd_type\": ", n++ ? ", " : "", msg);
        jstr(stdout, fd < 0 ? "none" : file_type(fd));
        CUmemGenericAllocationHandle hd = 0;
        CUdeviceptr va = 0;
        size_t g = 0;
        long long badat = -1;
        unsigned long long span = 0;
        const char *read = "same";
        CUmemAllocationProp p = vmm_prop(H_POSIX_FD);
        if (fd < 0 || size < 1 || off < 0) {
            read = "no fd or sizes in the message";
        } else if (CK(p_cuMemImportFromShareableHandle(&hd, (void *)(intptr_t)fd, H_POSIX_FD)) ||
                   CK(p_cuMemGetAllocationGranularity(&g, &p, 0))) {
            read = last_error;
        } else {
            span = ((unsigned long long)(size + off) + g - 1) / g * g;
            CUmemAccessDesc acc = {{LOC_DEVICE, 0}, PROT_R};
            if (CK(p_cuMemAddressReserve(&va, span, 0, 0, 0)) || CK(p_cuMemMap(va, span, 0, hd, 0)) ||
                CK(p_cuMemSetAccess(va, span, &acc, 1)) ||
                sample(va, (unsigned long long)(size + off), seed, &badat) != 0)
                read = last_error;
            else if (badat >= 0)
                read = "differs";
        }
        if (strcmp(read, "same")) bad = 1;
        printf(", \"read\": ");
        jstr(stdout, read);
        printf("}");
        if (va) {
            p_cuMemUnmap(va, span);
            p_cuMemAddressFree(va, span);
        }
        if (hd) p_cuMemRelease(hd);
        if (fd >= 0) close(fd);
    }
    printf("], \"received\": %d}\n", n);
    close(s);
    return bad || n == 0;
}

/* ---- meminfo: device 0's memory, as the driver counts it --------------- */
static int cmd_meminfo(void) {
    size_t fr = 0, total = 0;
    if (!p_cuMemGetInfo) {
        printf("{\"error\": \"libcuda has no cuMemGetInfo_v2\"}\n");
        return 1;
    }
    if (init_device() || CK(p_cuMemGetInfo(&fr, &total))) {
        printf("{\"error\": ");
        jstr(stdout, last_error);
        printf("}\n");
        return 1;
    }
    printf("{\"free\": %zu, \"total\": %zu, \"used\": %zu}\n", fr, total, total - fr);
    return 0;
}

/* ---- read: a second importer of an IPC or fabric handle ---------------- */
static int parse_hex64(const char *h, unsigned char *out) {
    if (strlen(h) != 128) return -1;
    for (int i = 0; i < 64; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (unsigned char)v;
    }
    return 0;
}

static int cmd_read(const char *kind, const char *hexs, unsigned long long size, int seed) {
    unsigned char b[64];
    long long bad = -1;
    if (parse_hex64(hexs, b) != 0 || (strcmp(kind, "ipc") && strcmp(kind, "fabric"))) {
        fprintf(stderr, "gpu-proof-owner: read ipc|fabric HEX SIZE SEED\n");
        return 2;
    }
    if (init_device()) goto fail;
    if (!strcmp(kind, "ipc")) {
        CUipcMemHandle ih;
        CUdeviceptr p = 0;
        memcpy(ih.reserved, b, 64);
        if (CK(p_cuIpcOpenMemHandle(&p, ih, 1))) goto fail;
        if (sample(p, size, seed, &bad) != 0) goto fail;
        p_cuIpcCloseMemHandle(p);
    } else {
        CUmemFabricHandle fh;
        CUmemGenericAllocationHandle h;
        CUdeviceptr va = 0;
        size_t g = 0;
        memcpy(fh.data, b, 64);
        if (CK(p_cuMemImportFromShareableHandle(&h, &fh, H_FABRIC))) goto fail;
        CUmemAllocationProp p = vmm_prop(H_FABRIC);
        if (CK(p_cuMemGetAllocationGranularity(&g, &p, 0))) goto fail;
        unsigned long long span = (size + g - 1) / g * g;
        if (CK(p_cuMemAddressReserve(&va, span, 0, 0, 0))) goto fail;
        if (CK(p_cuMemMap(va, span, 0, h, 0))) goto fail;
        CUmemAccessDesc a = {{LOC_DEVICE, 0}, PROT_R};
        if (CK(p_cuMemSetAccess(va, span, &a, 1))) goto fail;
        if (sample(va, size, seed, &bad) != 0) goto fail;
        p_cuMemUnmap(va, span);
        p_cuMemAddressFree(va, span);
        p_cuMemRelease(h);
    }
    printf("{\"read\": \"%s\", \"first_bad\": %lld}\n", bad < 0 ? "same" : "differs", bad);
    return 0;
fail:
    printf("{\"error\": ");
    jstr(stdout, last_error);
    printf("}\n");
    return 1;
}

/* ---- twice: the driver's own answer to one memory opened twice -------- */
static int take(int pid, int fd) {
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int mine = pidfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
    if (pidfd >= 0) close(pidfd);
    return mine;
}

static int cmd_twice(const char *ipc_hex, int pid, int fd1, int fd2) {
    CUipcMemHandle ih;
    if (strlen(ipc_hex) != 128) goto usage;
    for (int i = 0; i < 64; i++) {
        unsigned v;
        if (sscanf(ipc_hex + 2 * i, "%2x", &v) != 1) goto usage;
        ih.reserved[i] = (unsigned char)v;
    }
    if (init_device()) {
        printf("{\"error\": ");
        jstr(stdout, last_error);
        printf("}\n");
        return 1;
    }
    /* The same IPC handle opened twice in one context. */
    CUdeviceptr a = 0, b = 0;
    unsigned char byte;
    int ra = p_cuIpcOpenMemHandle(&a, ih, 1);
    int rb = p_cuIpcOpenMemHandle(&b, ih, 1);
    int c1 = ra == 0 ? p_cuIpcCloseMemHandle(a) : -1;
    int after = ra == 0 && rb == 0 ? p_cuMemcpyDtoH(&byte, b, 1) : -1;
    int c2 = rb == 0 ? p_cuIpcCloseMemHandle(b) : -1;
    int c3 = ra == 0 && rb == 0 ? p_cuIpcCloseMemHandle(a) : -1;
    printf("{\"ipc\": {\"open1\": %d, \"open2\": %d, \"same_pointer\": %s, \"close1\": %d, "
           "\"read_after_one_close\": %d, \"close2\": %d, \"close3\": %d}",
           ra, rb, ra == 0 && rb == 0 && a == b ? "true" : "false", c1, after, c2, c3);
    /* One VMM allocation through two fds (two exports): what the driver
     * gives to tell them apart or not. */
    int m1 = take(pid, fd1), m2 = take(pid, fd2);
    CUmemGenericAllocationHandle h1 = 0, h2 = 0;
    int i1 = m1 < 0 ? -1 : p_cuMemImportFromShareableHandle(&h1, (void *)(intptr_t)m1, H_POSIX_FD);
    int i2 = m2 < 0 ? -1 : p_cuMemImportFromShareableHandle(&h2, (void *)(intptr_t)m2, H_POSIX_FD);
    long kc = m1 < 0 || m2 < 0 ? -2 : syscall(SYS_kcmp, getpid(), getpid(), 0, m1, m2);
    printf(", \"posix_fd\": {\"taken\": %s, \"import1\": %d, \"import2\": %d, \"handle1\": \"0x%llx\", "
           "\"handle2\": \"0x%llx\", \"same_handle\": %s, \"fd_type1\": ",
           m1 >= 0 && m2 >= 0 ? "true" : "false", i1, i2, h1, h2, i1 == 0 && i2 == 0 && h1 == h2 ? "true" : "false");
    jstr(stdout, m1 < 0 ? "none" : file_type(m1));
    printf(", \"fd_type2\": ");
    jstr(stdout, m2 < 0 ? "none" : file_type(m2));
    printf(", \"kcmp\": %ld", kc);
    /* Each handle mapped on its own: BUFFER_ID (7) and MEMORY_BLOCK_ID (20). */
    CUmemGenericAllocationHandle hs[2] = {h1, h2};
    int ok[2] = {i1 == 0, i2 == 0};
    unsigned long long ids[2][2] = {{0, 0}, {0, 0}};
    int rcs[2][2] = {{-1, -1}, {-1, -1}};
    for (int k = 0; k < 2; k++) {
        CUmemAllocationProp p = vmm_prop(H_POSIX_FD);
        size_t g = 0;
        CUdeviceptr va = 0;
        if (!ok[k] || !p_cuPointerGetAttribute || p_cuMemGetAllocationGranularity(&g, &p, 0)) continue;
        if (p_cuMemAddressReserve(&va, g, 0, 0, 0)) continue;
        CUmemAccessDesc acc = {{LOC_DEVICE, 0}, PROT_R};
        if (p_cuMemMap(va, g, 0, hs[k], 0) == 0) {
            p_cuMemSetAccess(va, g, &acc, 1);
            rcs[k][0] = p_cuPointerGetAttribute(&ids[k][0], 7, va);
            rcs[k][1] = p_cuPointerGetAttribute(&ids[k][1], 20, va);
            p_cuMemUnmap(va, g);
        }
        p_cuMemAddressFree(va, g);
    }
    printf(", \"buffer_id_rc\": [%d, %d], \"buffer_id\": [\"0x%llx\", \"0x%llx\"], \"same_buffer_id\": %s",
           rcs[0][0], rcs[1][0], ids[0][0], ids[1][0],
           rcs[0][0] == 0 && rcs[1][0] == 0 && ids[0][0] == ids[1][0] ? "true" : "false");
    printf(", \"memory_block_id_rc\": [%d, %d], \"memory_block_id\": [\"0x%llx\", \"0x%llx\"], "
           "\"same_memory_block_id\": %s",
           rcs[0][1], rcs[1][1], ids[0][1], ids[1][1],
           rcs[0][1] == 0 && rcs[1][1] == 0 && ids[0][1] == ids[1][1] ? "true" : "false");
    int r1 = i1 == 0 ? p_cuMemRelease(h1) : -1;
    int r2 = i2 == 0 ? p_cuMemRelease(h2) : -1;
    printf(", \"release1\": %d, \"release2\": %d}}\n", r1, r2);
    return 0;
usage:
    fprintf(stderr, "gpu-proof-owner: twice wants 128 hex digits\n");
    return 2;
}

/* ---- pair: the control, two distinct allocations imported together ---- */
static int cmd_pair(int pid, int fd1, int fd2) {
    if (init_device()) {
        printf("{\"error\": ");
        jstr(stdout, last_error);
        printf("}\n");
        return 1;
    }
    /* As kvcr does: both imported, then both mapped, then each asked. */
    int m[2] = {take(pid, fd1), take(pid, fd2)};
    CUmemGenericAllocationHandle h[2] = {0, 0};
    int imp[2] = {-1, -1}, rc[2] = {-1, -1};
    unsigned long long id[2] = {0, 0};
    CUdeviceptr va[2] = {0, 0};
    size_t g = 0;
    int mapped[2] = {0, 0};
    for (int k = 0; k < 2; k++)
        if (m[k] >= 0) imp[k] = p_cuMemImportFromShareableHandle(&h[k], (void *)(intptr_t)m[k], H_POSIX_FD);
    CUmemAllocationProp p = vmm_prop(H_POSIX_FD);
    int gr = p_cuMemGetAllocationGranularity(&g, &p, 0);
    for (int k = 0; k < 2; k++) {
        if (imp[k] != 0 || gr != 0 || p_cuMemAddressReserve(&va[k], g, 0, 0, 0)) continue;
        CUmemAccessDesc acc = {{LOC_DEVICE, 0}, PROT_R};
        if (p_cuMemMap(va[k], g, 0, h[k], 0) == 0) {
            mapped[k] = 1;
            p_cuMemSetAccess(va[k], g, &acc, 1);
        }
    }
    for (int k = 0; k < 2; k++)
        if (mapped[k] && p_cuPointerGetAttribute) rc[k] = p_cuPointerGetAttribute(&id[k], 20, va[k]);
    for (int k = 0; k < 2; k++) {
        if (mapped[k]) p_cuMemUnmap(va[k], g);
        if (va[k]) p_cuMemAddressFree(va[k], g);
        if (imp[k] == 0) p_cuMemRelease(h[k]);
        if (m[k] >= 0) close(m[k]);
    }
    printf("{\"taken\": %s, \"import\": [%d, %d], \"handles\": [\"0x%llx\", \"0x%llx\"], "
           "\"memory_block_id_rc\": [%d, %d], \"memory_block_id\": [\"0x%llx\", \"0x%llx\"], "
           "\"distinct_ids\": %s}\n",
           m[0] >= 0 && m[1] >= 0 ? "true" : "false", imp[0], imp[1], h[0], h[1], rc[0], rc[1], id[0], id[1],
           rc[0] == 0 && rc[1] == 0 && id[0] != 0 && id[1] != 0 && id[0] != id[1] ? "true" : "false");
    return imp[0] == 0 && imp[1] == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) goto usage;
    if (load()) return 1;
    if (!strcmp(argv[1], "env")) return cmd_env();
    if (!strcmp(argv[1], "serve") && argc == 4) {
        dir = argv[2];
        return cmd_serve(strtoull(argv[3], NULL, 10));
    }
    if (!strcmp(argv[1], "probe") && (argc == 6 || argc == 7))
        return cmd_probe(atoi(argv[2]), atoi(argv[3]), strtoull(argv[4], NULL, 10), atoi(argv[5]),
                         argc == 7 && !strcmp(argv[6], "write"));
    if (!strcmp(argv[1], "read") && argc == 6)
        return cmd_read(argv[2], argv[3], strtoull(argv[4], NULL, 10), atoi(argv[5]));
    if (!strcmp(argv[1], "take") && argc == 4) return cmd_take(argv[2], atoi(argv[3]));
    if (!strcmp(argv[1], "meminfo") && argc == 2) return cmd_meminfo();
    if (!strcmp(argv[1], "twice") && argc == 6)
        return cmd_twice(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    if (!strcmp(argv[1], "pair") && argc == 5) return cmd_pair(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
usage:
    fprintf(stderr, "usage: gpu-proof-owner env | serve DIR SIZE_MIB | probe PID FD SIZE SEED [write]"
                    " | read ipc|fabric HEX SIZE SEED | twice IPC_HEX PID FD1 FD2 | pair PID FD1 FD2"
                    " | take SOCKET SEED | meminfo\n");
    return 2;
}
