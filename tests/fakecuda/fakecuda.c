/*
 * fakecuda: an ABI-level fake of the CUDA driver (libcuda.so.1) for kvcr's
 * tests (tests/it/import/fakecuda.rs). It implements the driver entry points kvcr
 * calls with the C signatures and struct layouts of cuda.h (CUDA 12.x),
 * keeps real state (initialisation, primary contexts, the current context,
 * IPC mappings, imported handles, reservations, mappings and their access
 * flags), enforces the documented rules, and logs every call.
 *
 * Built by the test at run time: cc -shared -fPIC -o DIR/libcuda.so.1, and
 * loaded by the real kvcr binary through LD_LIBRARY_PATH.
 *
 * Environment:
 *   FAKECUDA_LOG=PATH          append one line per event (below)
 *   FAKECUDA_GPUS=U,U,...      visible GPUs by UUID (GPU-/MIG- prefix optional);
 *                              U@P is a MIG instance U of physical GPU P:
 *                              cuDeviceGetUuid_v2 answers U, and so does
 *                              cuDeviceGetUuid (v1 is MIG-aware in current
 *                              CUDA), unless FAKECUDA_V1_PHYSICAL=1 (older
 *                              drivers: v1 answers P); cuIpcOpenMemHandle
 *                              of a handle of one MIG instance in a context
 *                              of another fails (801): IPC works within a
 *                              GPU instance, never across
 *   FAKECUDA_IPC=HEX:DEV:SIZE[:ALIAS],...  importable cuda_ipc handles (128 hex);
 *                              handles with one nonzero ALIAS are one exported
 *                              allocation (they open at one pointer). As the
 *                              driver documents, opening a handle already open
 *                              in the context returns the existing pointer and
 *                              counts a reference; each close drops one.
 *   FAKECUDA_FABRIC=HEX:DEV:SIZE,...  importable fabric handles
 *     posix_fd handles: only what an owner process exported through this
 *     fake (FAKECUDA_STATE, the owner-side section at the end), in the
 *     driver's shape: each export is a fresh open of /dev/null, a
 *     character device whose fstat and whose file identity say nothing
 *     about the allocation (two exports of one allocation are two files).
 *   FAKECUDA_REIMPORT=same     cuMemImportFromShareableHandle of an
 *                              allocation this process already holds
 *                              returns the existing handle (and counts a
 *                              reference: one cuMemRelease each); default:
 *                              a new handle each time (the reference
 *                              allows either)
 *   FAKECUDA_BLOCK_ID=MODE     how cuPointerGetAttribute answers
 *                              CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID (20)
 *                              and BUFFER_ID (7): "allocation" (default)
 *                              one id per physical allocation, as
 *                              documented; "import" a new id per import
 *                              (each cuIpcOpenMemHandle or
 *                              cuMemImportFromShareableHandle that makes a
 *                              new open), so two imports of one allocation
 *                              differ; "constant" one id for everything;
 *                              "zero" the id 0; "absent" status 1, as a
 *                              driver that predates them
 *   FAKECUDA_NO_BLOCK_ID=1     the same as FAKECUDA_BLOCK_ID=absent
 *   cuMemSetAccess and cuMemGetAccess are per (mapping, device), and a read
 *   through a mapping needs access from the current context's device.
 *   FAKECUDA_MEM_TOTAL=N       cuMemGetInfo's total per device (default 80 GiB)
 *   FAKECUDA_COMPUTE_MODE=N    CU_DEVICE_ATTRIBUTE_COMPUTE_MODE of every device
 *                              (default 0; 3 is exclusive-process)
 *   FAKECUDA_GRANULARITY=N     allocation granularity (default 2 MiB)
 *   FAKECUDA_FAIL=SYM:N:CODE,...   the Nth call of SYM returns CODE (any
 *                              integer) and does nothing; SYM "*" counts
 *                              every call (cuGetErrorString/Name excepted)
 *   FAKECUDA_DELAY=SYM:N:MS,...    the Nth call of SYM sleeps MS first
 *   FAKECUDA_STUB=1            behave as the toolkit's stub: every call 34
 *   FAKECUDA_NO_READONLY=1     cuMemSetAccess refuses PROT_READ (801)
 *   FAKECUDA_LOCATION=TYPE:ID  cuMemGetAllocationPropertiesFromHandle reports
 *                              this location (any integers) for VMM imports
 *   FAKECUDA_ALLOC_TYPE=N      ... and this allocation type (default 1, pinned)
 *   FAKECUDA_ACCESS=N          cuMemGetAccess reports N whatever was set
 *   FAKECUDA_COMPRESSIBLE=1    ... and allocFlags.compressionType 1, whose
 *                              granularity is twice FAKECUDA_GRANULARITY
 * Memory contents (cuMemcpyDtoH_v2 reads them; only an owner process's
 * cuMemcpyHtoD_v2 writes, see the owner-side section at the end): a
 * posix_fd allocation's bytes are its memfd's; a cuda_ipc or fabric handle
 * an owner process exported (FAKECUDA_STATE) holds the owner's bytes; any
 * other cuda_ipc and fabric memory holds byte (o * 131) ^ (o >> 9) ^ SEED at
 * offset o, SEED the first handle byte (kvcr's sim_byte, src/import/engine/sim.rs).
 * Built with -DFAKECUDA_OLD_DRIVER it lacks cuMemImportFromShareableHandle.
 *
 * Log lines (tab-separated):
 *   call  N  SYM  RC  details      every counted call, after it ran
 *   acquire KIND ID / release KIND ID    state changes, as they happen
 *   delay SYM MS                   before a delayed call sleeps
 *   violation SYM what             kvcr broke a documented rule
 *   held KIND ID                   at exit, for everything still held
 *   exit
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- cuda.h types (CUDA 12.x), layouts pinned below ---------------- */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUuuid_st { char bytes[16]; } CUuuid;
typedef struct CUipcMemHandle_st { char reserved[64]; } CUipcMemHandle;
typedef struct CUmemFabricHandle_st { unsigned char data[64]; } CUmemFabricHandle;
typedef enum { CU_MEM_LOCATION_TYPE_INVALID = 0, CU_MEM_LOCATION_TYPE_DEVICE = 1 } CUmemLocationType;
typedef enum { CU_MEM_ALLOCATION_TYPE_INVALID = 0, CU_MEM_ALLOCATION_TYPE_PINNED = 1 } CUmemAllocationType;
typedef enum {
    CU_MEM_HANDLE_TYPE_NONE = 0,
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
    CU_MEM_HANDLE_TYPE_WIN32 = 2,
    CU_MEM_HANDLE_TYPE_WIN32_KMT = 4,
    CU_MEM_HANDLE_TYPE_FABRIC = 8
} CUmemAllocationHandleType;
typedef enum {
    CU_MEM_ACCESS_FLAGS_PROT_NONE = 0,
    CU_MEM_ACCESS_FLAGS_PROT_READ = 1,
    CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
} CUmemAccess_flags;
typedef struct CUmemLocation_st { CUmemLocationType type; int id; } CUmemLocation;
typedef struct CUmemAllocationProp_st {
    CUmemAllocationType type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;
typedef struct CUmemAccessDesc_st { CUmemLocation location; CUmemAccess_flags flags; } CUmemAccessDesc;

_Static_assert(sizeof(CUuuid) == 16, "CUuuid is 16 bytes");
_Static_assert(sizeof(CUipcMemHandle) == 64, "CUipcMemHandle is 64 bytes");
_Static_assert(sizeof(CUmemFabricHandle) == 64, "CUmemFabricHandle is 64 bytes");
_Static_assert(sizeof(CUmemLocation) == 8, "CUmemLocation is 8 bytes");
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");
_Static_assert(offsetof(CUmemAllocationProp, location) == 8, "prop.location at 8");
_Static_assert(offsetof(CUmemAllocationProp, win32HandleMetaData) == 16, "prop.win32 at 16");
_Static_assert(offsetof(CUmemAllocationProp, allocFlags) == 24, "prop.allocFlags at 24");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");
_Static_assert(sizeof(CUdeviceptr) == 8, "CUdeviceptr is 64-bit");

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_STUB_LIBRARY 34
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_ALREADY_MAPPED 208
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_NOT_SUPPORTED 801
#define CU_POINTER_ATTRIBUTE_BUFFER_ID 7
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID 20

#define EXPORT __attribute__((visibility("default")))

/* ---- state ---------------------------------------------------------- */
#define MAX_GPUS 16
#define MAX_RES 4096

struct CUctx_st { int ordinal; };

enum kind { K_IPC, K_MEM, K_VA, K_MAP };
static const char *kind_name[] = {"ipc", "mem", "va", "map"};

struct res {
    int live;
    enum kind kind;
    unsigned long long ptr;  /* ipc/va/map: address; mem: handle */
    unsigned long long size;
    int dev;                 /* device of the memory */
    unsigned long long handle; /* map: the mapped mem handle */
    int access[MAX_GPUS];    /* map: access flags set per device, -1 none
                                (cuMemSetAccess is per (mapping, device)) */
    unsigned char bytes[64]; /* ipc: the handle bytes */
    int refs;                /* ipc: opens not yet closed; mem: imports of it
                                (FAKECUDA_REIMPORT=same) not yet released */
    int memfd;               /* mem (posix_fd): the backing file, else -1 */
    int ref;                 /* mem, map: the reference it holds on its
                                physical allocation (a locked /dev/null), else -1 */
    char phys[40];           /* mem, map: the physical allocation's id, "" none */
    long long lock;          /* mem, map: its lock byte (see "physical allocations") */
    unsigned long long block; /* ipc, mem: MEMORY_BLOCK_ID of its memory */
    unsigned long long import_block; /* ... under FAKECUDA_BLOCK_ID=import: this open's own */
    int seed;                /* ipc, mem (fabric): the content seed */
    int htype;               /* mem: the handle type it was imported from */
    int alias;               /* ipc: the handle's ALIAS (0: none) */
    int ctx;                 /* ipc: the context it was opened in */
};

struct cfg_handle { unsigned char bytes[64]; int dev; unsigned long long size; int alias; };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;
static int initialized;
static int stub_mode, no_readonly;
static unsigned long long granularity = 2ull << 20;
static int ngpus;
static unsigned char gpu_uuid[MAX_GPUS][16];
static unsigned char gpu_parent[MAX_GPUS][16]; /* MIG: the physical GPU */
static int gpu_is_mig[MAX_GPUS], v1_physical;
static struct CUctx_st ctxs[MAX_GPUS];
static int ctx_refs[MAX_GPUS];
static __thread CUcontext current;
static struct res res[MAX_RES];
static int nres;
static struct cfg_handle ipc_cfg[64], fabric_cfg[64];
static int nipc, nfabric;
static unsigned long long next_va = 0x7f0000000000ull;
static unsigned long long next_handle = 0xa110c000ull;
static long global_calls;

struct rule { char sym[64]; long nth; long value; };
static struct rule fails[64], delays[64];
static int nfails, ndelays;
struct counter { char sym[64]; long n; };
static struct counter counters[64];
static int ncounters;

static void logf_(const char *fmt, ...) {
    if (log_fd < 0) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof buf - 2) n = sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(log_fd, buf, (size_t)n);
    (void)w;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int parse_hex(const char *s, size_t n, unsigned char *out) {
    for (size_t i = 0; i < n; i++) {
        int a = hexval(s[2 * i]), b = hexval(s[2 * i + 1]);
        if (a < 0 || b < 0) return -1;
        out[i] = (unsigned char)(a * 16 + b);
    }
    return 0;
}

static void parse_uuid(const char *s, unsigned char *out) {
    if (!strncmp(s, "GPU-", 4) || !strncmp(s, "MIG-", 4)) s += 4;
    int k = 0;
    for (; *s && *s != ',' && k < 16; s++) {
        if (*s == '-') continue;
        int a = hexval(s[0]), b = hexval(s[1]);
        if (a < 0 || b < 0) break;
        out[k++] = (unsigned char)(a * 16 + b);
        s++;
    }
}

static void parse_handles(const char *env, struct cfg_handle *out, int *n) {
    const char *s = getenv(env);
    while (s && *s && *n < 64) {
        struct cfg_handle h;
        memset(&h, 0, sizeof h);
        if (strlen(s) >= 128 && parse_hex(s, 64, h.bytes) == 0 && s[128] == ':') {
            char *end;
            h.dev = (int)strtol(s + 129, &end, 10);
            if (*end == ':') h.size = strtoull(end + 1, &end, 10);
            if (*end == ':') h.alias = (int)strtol(end + 1, &end, 10);
            out[(*n)++] = h;
            s = end;
        }
        s = strchr(s, ',');
        if (s) s++;
    }
}

static void parse_rules(const char *env, struct rule *out, int *n) {
    const char *s = getenv(env);
    while (s && *s && *n < 64) {
        struct rule r;
        memset(&r, 0, sizeof r);
        const char *c = strchr(s, ':');
        if (!c || (size_t)(c - s) >= sizeof r.sym) break;
        memcpy(r.sym, s, (size_t)(c - s));
        char *end;
        r.nth = strtol(c + 1, &end, 10);
        if (*end != ':') break;
        r.value = strtol(end + 1, &end, 10);
        out[(*n)++] = r;
        s = strchr(end, ',');
        if (s) s++;
    }
}

__attribute__((constructor)) static void setup(void) {
    const char *p = getenv("FAKECUDA_LOG");
    if (p && *p) log_fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    stub_mode = getenv("FAKECUDA_STUB") && *getenv("FAKECUDA_STUB") == '1';
    no_readonly = getenv("FAKECUDA_NO_READONLY") && *getenv("FAKECUDA_NO_READONLY") == '1';
    if (getenv("FAKECUDA_GRANULARITY")) granularity = strtoull(getenv("FAKECUDA_GRANULARITY"), 0, 10);
    const char *g = getenv("FAKECUDA_GPUS");
    v1_physical = getenv("FAKECUDA_V1_PHYSICAL") && *getenv("FAKECUDA_V1_PHYSICAL") == '1';
    while (g && *g && ngpus < MAX_GPUS) {
        parse_uuid(g, gpu_uuid[ngpus]);
        const char *at = strchr(g, '@'), *comma = strchr(g, ',');
        if (at && (!comma || at < comma)) {
            parse_uuid(at + 1, gpu_parent[ngpus]);
            gpu_is_mig[ngpus] = 1;
        }
        ctxs[ngpus].ordinal = ngpus;
        ngpus++;
        g = strchr(g, ',');
        if (g) g++;
    }
    parse_handles("FAKECUDA_IPC", ipc_cfg, &nipc);
    parse_handles("FAKECUDA_FABRIC", fabric_cfg, &nfabric);
    parse_rules("FAKECUDA_FAIL", fails, &nfails);
    parse_rules("FAKECUDA_DELAY", delays, &ndelays);
    logf_("start\tpid=%d", (int)getpid());
}

__attribute__((destructor)) static void teardown(void) {
    for (int i = 0; i < MAX_GPUS; i++)
        for (int k = 0; k < ctx_refs[i]; k++) logf_("held\tctx\tdev%d", i);
    for (int i = 0; i < nres; i++)
        for (int k = 0; res[i].live && k < (res[i].kind == K_MAP || res[i].kind == K_VA ? 1 : res[i].refs); k++)
            logf_("held\t%s\t0x%llx+%llu", kind_name[res[i].kind], res[i].ptr, res[i].size);
    logf_("exit");
}

/* ---- call bookkeeping ----------------------------------------------- */
static long count(const char *sym) {
    for (int i = 0; i < ncounters; i++)
        if (!strcmp(counters[i].sym, sym)) return ++counters[i].n;
    if (ncounters < 64) {
        snprintf(counters[ncounters].sym, sizeof counters[ncounters].sym, "%s", sym);
        counters[ncounters].n = 1;
        ncounters++;
    }
    return 1;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* Returns 1 and sets *rc when the call is to fail (injected, stub, or
 * before cuInit); the caller returns *rc at once. */
static int enter_call(const char *sym, long *seq, int *rc, int needs_init) {
    *seq = ++global_calls;
    long nth = count(sym);
    for (int i = 0; i < ndelays; i++)
        if ((!strcmp(delays[i].sym, sym) && delays[i].nth == nth) ||
            (!strcmp(delays[i].sym, "*") && delays[i].nth == *seq)) {
            logf_("delay\t%s\t%ld", sym, delays[i].value);
            pthread_mutex_unlock(&mu);
            sleep_ms(delays[i].value);
            pthread_mutex_lock(&mu);
        }
    for (int i = 0; i < nfails; i++)
        if ((!strcmp(fails[i].sym, sym) && fails[i].nth == nth) ||
            (!strcmp(fails[i].sym, "*") && fails[i].nth == *seq)) {
            *rc = (int)fails[i].value;
            logf_("call\t%ld\t%s\t%d\tinjected", *seq, sym, *rc);
            return 1;
        }
    if (stub_mode) {
        *rc = CUDA_ERROR_STUB_LIBRARY;
        logf_("call\t%ld\t%s\t%d\tstub", *seq, sym, *rc);
        return 1;
    }
    if (needs_init && !initialized) {
        *rc = CUDA_ERROR_NOT_INITIALIZED;
        logf_("violation\t%s\tcalled before cuInit", sym);
        logf_("call\t%ld\t%s\t%d\t", *seq, sym, *rc);
        return 1;
    }
    return 0;
}

#define BEGIN(sym, needs_init)                                   \
    long seq_;                                                   \
    int rc_ = 0;                                                 \
    const char *sym_ = sym;                                      \
    pthread_mutex_lock(&mu);                                     \
    if (enter_call(sym_, &seq_, &rc_, needs_init)) {             \
        pthread_mutex_unlock(&mu);                               \
        return rc_;                                              \
    }
#define END(rc, ...)                                             \
    do {                                                         \
        int r__ = (rc);                                          \
        char d__[512];                                           \
        snprintf(d__, sizeof d__, __VA_ARGS__);                  \
        logf_("call\t%ld\t%s\t%d\t%s", seq_, sym_, r__, d__);    \
        pthread_mutex_unlock(&mu);                               \
        return r__;                                              \
    } while (0)
#define VIOLATION(rc, ...)                                       \
    do {                                                         \
        char v__[512];                                           \
        snprintf(v__, sizeof v__, __VA_ARGS__);                  \
        logf_("violation\t%s\t%s", sym_, v__);                   \
        END(rc, "%s", v__);                                      \
    } while (0)

static struct res *new_res(enum kind k) {
    if (nres >= MAX_RES) return NULL;
    struct res *r = &res[nres++];
    memset(r, 0, sizeof *r);
    r->live = 1;
    r->kind = k;
    for (int d = 0; d < MAX_GPUS; d++) r->access[d] = -1;
    r->memfd = -1;
    r->ref = -1;
    r->refs = 1;
    r->import_block = 0x1d0000000ull + (unsigned long long)nres;
    return r;
}

static void acquired(struct res *r) {
    logf_("acquire\t%s\t0x%llx+%llu", kind_name[r->kind], r->ptr, r->size);
}

static void released(struct res *r) {
    r->live = 0;
    logf_("release\t%s\t0x%llx+%llu", kind_name[r->kind], r->ptr, r->size);
}

static struct res *find(enum kind k, unsigned long long ptr) {
    for (int i = 0; i < nres; i++)
        if (res[i].live && res[i].kind == k && res[i].ptr == ptr) return &res[i];
    return NULL;
}

static struct res *containing(enum kind k, unsigned long long ptr) {
    for (int i = 0; i < nres; i++)
        if (res[i].live && res[i].kind == k && ptr >= res[i].ptr && ptr - res[i].ptr < res[i].size)
            return &res[i];
    return NULL;
}

static int current_ok(void) {
    return current != NULL && ctx_refs[current->ordinal] > 0;
}

static int resources_on(int dev) {
    int n = 0;
    for (int i = 0; i < nres; i++)
        if (res[i].live && res[i].dev == dev && res[i].kind != K_MAP) n++;
    return n;
}

static unsigned long long fresh_va(unsigned long long size) {
    unsigned long long p = next_va;
    next_va += ((size / (1ull << 30)) + 1) * (1ull << 30);
    return p;
}

/* ---- physical allocations shared between processes ---------------------
 * An owner's VMM (and cuMemAlloc) allocation made through this fake with
 * FAKECUDA_STATE=DIR set is one physical allocation named ID (PID-N): its
 * bytes are the file DIR/mem-ID, and DIR/alloc lists it as
 * "alloc ID LOCK DEV SIZE". It lives while any reference to it lives, in
 * any process: the owner's handle, a mapping, an exported posix_fd, an
 * importer's handle. Each reference is an open of /dev/null holding an
 * OFD read lock on byte LOCK of it (the kernel drops the lock when the
 * last fd of that open file is closed, in whatever process it was passed
 * to: dup, fork, pidfd_getfd, SCM_RIGHTS); anyone tests liveness by asking
 * for a conflicting write lock. An exported posix_fd is such an open with
 * a second lock on its own byte, listed as "export BYTE ID": that is how
 * the importer finds the allocation behind an fd whose fstat says only
 * "/dev/null". kvcr reads none of this; it sees what the driver shows. */
struct phys { char id[40]; long long lock; int dev; unsigned long long size; };

static const char *state_dir(void) {
    const char *st = getenv("FAKECUDA_STATE");
    return st && *st ? st : NULL;
}

static long long fresh_lock(void) {
    unsigned long long v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &v, sizeof v) != (ssize_t)sizeof v) v = 0;
        close(fd);
    }
    if (!v) v = ((unsigned long long)getpid() << 24) ^ (unsigned long long)time(NULL);
    return (long long)((v & ((1ull << 58) - 1)) | (1ull << 58));
}

static int lock_byte(int fd, long long at) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_RDLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = at;
    fl.l_len = 1;
    return fcntl(fd, F_OFD_SETLK, &fl);
}

/* 1 when some open file other than `fd`'s holds a lock on byte `at`
 * (fd -1: any open file at all). */
static int byte_locked(int fd, long long at) {
    int own = fd < 0;
    if (own) fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0) return 0;
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = at;
    fl.l_len = 1;
    int r = fcntl(fd, F_OFD_GETLK, &fl);
    if (own) close(fd);
    return r == 0 && fl.l_type != F_UNLCK;
}

/* A new reference to the allocation locked at `lock`: a locked /dev/null. */
static int ref_take(long long lock) {
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0) return -1;
    if (lock_byte(fd, lock) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int phys_live(const struct phys *p) { return byte_locked(-1, p->lock); }

static void state_path(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/%s", state_dir() ? state_dir() : ".", name);
}

static void state_append(const char *name, const char *line) {
    char p[4096];
    if (!state_dir()) return;
    state_path(p, sizeof p, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;
    ssize_t w = write(fd, line, strlen(line));
    (void)w;
    close(fd);
}

static int phys_find(const char *id, struct phys *out) {
    char p[4096], line[256];
    if (!state_dir()) return -1;
    state_path(p, sizeof p, "alloc");
    FILE *f = fopen(p, "re");
    if (!f) return -1;
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        struct phys q;
        memset(&q, 0, sizeof q);
        if (sscanf(line, "alloc %39s %lld %d %llu", q.id, &q.lock, &q.dev, &q.size) == 4 &&
            !strcmp(q.id, id)) {
            *out = q;
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* The allocation an exported fd names: the export byte only its open file holds. */
static int phys_of_export(int fd, struct phys *out) {
    char p[4096], line[256], id[40];
    long long at;
    if (!state_dir()) return -1;
    state_path(p, sizeof p, "exports");
    FILE *f = fopen(p, "re");
    if (!f) return -1;
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "export %lld %39s", &at, id) == 2 && !byte_locked(fd, at) &&
            byte_locked(-1, at))
            found = phys_find(id, out);
    fclose(f);
    return found;
}

/* MEMORY_BLOCK_ID of a physical allocation: from its id (PID-N). */
static unsigned long long block_of_id(const char *id) {
    unsigned long long h = 1469598103934665603ull;
    for (; *id; id++) h = (h ^ (unsigned char)*id) * 1099511628211ull;
    return h | 1;
}

static unsigned long long block_of_bytes(const unsigned char *b, int alias) {
    if (alias) return 0xb10c000000ull + (unsigned long long)alias;
    unsigned long long h = 1469598103934665603ull;
    for (int i = 0; i < 64; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h | 1;
}

static int reimport_same(void) {
    return getenv("FAKECUDA_REIMPORT") && !strcmp(getenv("FAKECUDA_REIMPORT"), "same");
}

/* ---- entry points ----------------------------------------------------- */
EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr) {
    static const struct { int code; const char *text; } known[] = {
        {0, "no error"},
        {1, "invalid argument"},
        {3, "initialization error"},
        {34, "CUDA driver is a stub library"},
        {101, "invalid device ordinal"},
        {201, "invalid device context"},
        {500, "named symbol not found"},
        {801, "operation not supported"},
        {999, "unknown error"},
    };
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].code == error) {
            *pStr = known[i].text;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr) {
    return cuGetErrorString(error, pStr);
}

EXPORT CUresult cuInit(unsigned int flags) {
    BEGIN("cuInit", 0);
    if (flags != 0) VIOLATION(CUDA_ERROR_INVALID_VALUE, "flags %u, must be 0", flags);
    initialized = 1;
    END(CUDA_SUCCESS, "flags=0");
}

EXPORT CUresult cuDriverGetVersion(int *v) {
    if (stub_mode) return CUDA_ERROR_STUB_LIBRARY;
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = 12080;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count_) {
    BEGIN("cuDeviceGetCount", 1);
    if (!count_) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null count");
    *count_ = ngpus;
    END(CUDA_SUCCESS, "count=%d", ngpus);
}

/* CUdevice handles differ from ordinals (handle = 0x100 + ordinal), so a
 * caller that confuses the two is caught. */
static int ordinal_of(CUdevice dev) {
    int o = dev - 0x100;
    return (o >= 0 && o < ngpus) ? o : -1;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
    BEGIN("cuDeviceGet", 1);
    if (!dev) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null device");
    if (ordinal < 0 || ordinal >= ngpus) END(CUDA_ERROR_INVALID_DEVICE, "ordinal=%d", ordinal);
    *dev = 0x100 + ordinal;
    END(CUDA_SUCCESS, "ordinal=%d", ordinal);
}

static CUresult uuid_common(const char *name, CUuuid *uuid, CUdevice dev, int v1) {
    BEGIN(name, 1);
    int o = ordinal_of(dev);
    if (!uuid) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null uuid");
    if (o < 0) VIOLATION(CUDA_ERROR_INVALID_DEVICE, "device handle %d", dev);
    int parent = v1 && v1_physical && gpu_is_mig[o];
    memcpy(uuid->bytes, parent ? gpu_parent[o] : gpu_uuid[o], 16);
    END(CUDA_SUCCESS, "dev=%d%s", o, gpu_is_mig[o] ? (parent ? " mig parent" : " mig") : "");
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
    return uuid_common("cuDeviceGetUuid", uuid, dev, 1);
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
    return uuid_common("cuDeviceGetUuid_v2", uuid, dev, 0);
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    BEGIN("cuDevicePrimaryCtxRetain", 1);
    int o = ordinal_of(dev);
    if (!pctx) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null context pointer");
    if (o < 0) VIOLATION(CUDA_ERROR_INVALID_DEVICE, "device handle %d (an ordinal?)", dev);
    ctx_refs[o]++;
    *pctx = &ctxs[o];
    logf_("acquire\tctx\tdev%d", o);
    END(CUDA_SUCCESS, "dev=%d refs=%d", o, ctx_refs[o]);
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    BEGIN("cuDevicePrimaryCtxRelease_v2", 1);
    int o = ordinal_of(dev);
    if (o < 0) VIOLATION(CUDA_ERROR_INVALID_DEVICE, "device handle %d", dev);
    if (ctx_refs[o] == 0) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "release of dev%d without a retain", o);
    if (ctx_refs[o] == 1 && resources_on(o) > 0)
        logf_("violation\t%s\tlast reference of dev%d released with %d resources on it", sym_, o,
              resources_on(o));
    ctx_refs[o]--;
    if (current == &ctxs[o] && ctx_refs[o] == 0) current = NULL;
    logf_("release\tctx\tdev%d", o);
    END(CUDA_SUCCESS, "dev=%d refs=%d", o, ctx_refs[o]);
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    BEGIN("cuCtxSetCurrent", 1);
    if (ctx == NULL) {
        current = NULL;
        END(CUDA_SUCCESS, "ctx=null");
    }
    int o = -1;
    for (int i = 0; i < ngpus; i++)
        if (ctx == &ctxs[i]) o = i;
    if (o < 0) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "not a context this driver made");
    if (ctx_refs[o] == 0) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "context of dev%d is released", o);
    current = ctx;
    END(CUDA_SUCCESS, "dev=%d", o);
}

EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags) {
    BEGIN("cuIpcOpenMemHandle_v2", 1);
    if (!pdptr) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null pointer");
    if (flags > 1) VIOLATION(CUDA_ERROR_INVALID_VALUE, "flags %u", flags);
    if (!current_ok()) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "no current context");
    struct cfg_handle *h = NULL;
    for (int i = 0; i < nipc; i++)
        if (!memcmp(ipc_cfg[i].bytes, handle.reserved, 64)) h = &ipc_cfg[i];
    if (!h) END(CUDA_ERROR_INVALID_VALUE, "unknown handle");
    /* MIG: CUDA IPC works between processes on one GPU instance, never
     * across instances (modelled status: 801). */
    if ((gpu_is_mig[current->ordinal] || (h->dev >= 0 && h->dev < ngpus && gpu_is_mig[h->dev])) &&
        h->dev != current->ordinal)
        END(CUDA_ERROR_NOT_SUPPORTED, "handle of dev%d opened on dev%d: CUDA IPC across MIG GPU instances",
            h->dev, current->ordinal);
    for (int i = 0; i < nres; i++)
        if (res[i].live && res[i].kind == K_IPC && res[i].ctx == current->ordinal &&
            (!memcmp(res[i].bytes, handle.reserved, 64) || (h->alias && res[i].alias == h->alias))) {
            /* Already open in this context: the same pointer, one more reference. */
            res[i].refs++;
            *pdptr = res[i].ptr;
            acquired(&res[i]);
            END(CUDA_SUCCESS, "ptr=0x%llx size=%llu dev=%d refs=%d", res[i].ptr, res[i].size,
                res[i].dev, res[i].refs);
        }
    struct res *r = new_res(K_IPC);
    if (!r) END(2, "out of slots");
    r->ptr = fresh_va(h->size);
    r->size = h->size;
    r->dev = h->dev;
    memcpy(r->bytes, handle.reserved, 64);
    r->refs = 1;
    r->seed = handle.reserved[0] & 0xff;
    r->alias = h->alias;
    r->block = block_of_bytes((const unsigned char *)handle.reserved, h->alias);
    r->ctx = current->ordinal;
    *pdptr = r->ptr;
    acquired(r);
    END(CUDA_SUCCESS, "ptr=0x%llx size=%llu dev=%d", r->ptr, r->size, r->dev);
}

EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
    BEGIN("cuIpcCloseMemHandle", 1);
    if (!current_ok()) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "no current context");
    struct res *r = find(K_IPC, dptr);
    if (!r) VIOLATION(CUDA_ERROR_INVALID_VALUE, "0x%llx is not an open IPC mapping", dptr);
    if (--r->refs > 0) {
        logf_("release\t%s\t0x%llx+%llu", kind_name[r->kind], r->ptr, r->size);
        END(CUDA_SUCCESS, "ptr=0x%llx refs=%d", dptr, r->refs);
    }
    released(r);
    END(CUDA_SUCCESS, "ptr=0x%llx", dptr);
}

/* The owner-side section (end of file) maps the memory behind a fabric
 * handle an owner process exported, so copies read the owner's bytes. */
static void fakeowner_imported_fabric(unsigned long long handle, const unsigned char *bytes)
    __attribute__((unused));

#ifndef FAKECUDA_OLD_DRIVER /* -DFAKECUDA_OLD_DRIVER: a driver without VMM import */
static int fabric_phys(const unsigned char *bytes, struct phys *out) {
    char p[4096], name[160], hx[129], target[256];
    for (int i = 0; i < 64; i++) sprintf(hx + 2 * i, "%02x", bytes[i]);
    snprintf(name, sizeof name, "fab-%s", hx);
    state_path(p, sizeof p, name);
    ssize_t n = readlink(p, target, sizeof target - 1);
    if (n <= 4) return -1;
    target[n] = 0;
    return strncmp(target, "mem-", 4) ? -1 : phys_find(target + 4, out);
}

EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os,
                                               CUmemAllocationHandleType type) {
    BEGIN("cuMemImportFromShareableHandle", 1);
    if (!handle) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null handle pointer");
    int dev = -1, seed = 0, memfd = -1;
    unsigned long long size = 0;
    struct phys ph;
    memset(&ph, 0, sizeof ph);
    if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
        if (!os) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null fabric handle");
        const CUmemFabricHandle *fh = os;
        for (int i = 0; i < nfabric; i++)
            if (!memcmp(fabric_cfg[i].bytes, fh->data, 64)) {
                dev = fabric_cfg[i].dev;
                size = fabric_cfg[i].size;
                seed = fh->data[0];
            }
        if (dev < 0) END(CUDA_ERROR_INVALID_VALUE, "unknown fabric handle");
        /* An owner's export: importable by anyone while any reference lives. */
        if (fabric_phys(fh->data, &ph) == 0 && !phys_live(&ph))
            END(CUDA_ERROR_INVALID_VALUE, "the fabric allocation %s has no reference left (freed)", ph.id);
    } else if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        int fd = (int)(intptr_t)os;
        struct stat st;
        if (fstat(fd, &st) != 0) END(CUDA_ERROR_INVALID_VALUE, "fd %d: %s", fd, strerror(errno));
        if (!S_ISCHR(st.st_mode) || phys_of_export(fd, &ph) != 0)
            END(CUDA_ERROR_INVALID_VALUE, "fd %d is not an exported allocation", fd);
        dev = ph.dev;
        size = ph.size;
        char p[4096], name[64];
        snprintf(name, sizeof name, "mem-%s", ph.id);
        state_path(p, sizeof p, name);
        /* The driver keeps the memory, not the caller's fd: so does the fake. */
        memfd = open(p, O_RDWR | O_CLOEXEC);
        if (memfd < 0) END(CUDA_ERROR_INVALID_VALUE, "the memory of %s is gone: %s", ph.id, strerror(errno));
    } else {
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "handle type %d", (int)type);
    }
    if (ph.id[0] && reimport_same())
        for (int i = 0; i < nres; i++)
            if (res[i].live && res[i].kind == K_MEM && !strcmp(res[i].phys, ph.id)) {
                /* FAKECUDA_REIMPORT=same: the handle this process already holds. */
                if (memfd >= 0) close(memfd);
                res[i].refs++;
                *handle = res[i].ptr;
                acquired(&res[i]);
                END(CUDA_SUCCESS, "type=%d handle=0x%llx size=%llu dev=%d refs=%d", (int)type, res[i].ptr,
                    res[i].size, res[i].dev, res[i].refs);
            }
    struct res *r = new_res(K_MEM);
    if (!r) {
        if (memfd >= 0) close(memfd);
        END(2, "out of slots");
    }
    r->ptr = next_handle++;
    r->size = size;
    r->dev = dev;
    r->seed = seed;
    r->memfd = memfd;
    r->htype = (int)type;
    if (ph.id[0]) {
        snprintf(r->phys, sizeof r->phys, "%s", ph.id);
        r->lock = ph.lock;
        r->ref = ref_take(ph.lock);
        r->block = block_of_id(ph.id);
    } else {
        r->block = block_of_bytes(((const CUmemFabricHandle *)os)->data, 0);
    }
    *handle = r->ptr;
    if (type == CU_MEM_HANDLE_TYPE_FABRIC) fakeowner_imported_fabric(r->ptr, ((const CUmemFabricHandle *)os)->data);
    acquired(r);
    END(CUDA_SUCCESS, "type=%d handle=0x%llx size=%llu dev=%d", (int)type, r->ptr, size, dev);
}
#endif

EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, int flags) {
    BEGIN("cuMemGetAllocationGranularity", 1);
    if (!g || !prop) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null pointer");
    if (flags != 0 && flags != 1) VIOLATION(CUDA_ERROR_INVALID_VALUE, "flags %d", flags);
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "prop.type %d", (int)prop->type);
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= ngpus)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "prop.location %d/%d", (int)prop->location.type,
                  prop->location.id);
    /* Compressible memory comes in larger pieces (modelled: twice). */
    unsigned long long gr = prop->allocFlags.compressionType ? 2 * granularity : granularity;
    *g = (size_t)gr;
    END(CUDA_SUCCESS, "dev=%d handle_types=%d compression=%d granularity=%llu", prop->location.id,
        (int)prop->requestedHandleTypes, (int)prop->allocFlags.compressionType, gr);
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                                    unsigned long long flags) {
    BEGIN("cuMemAddressReserve", 1);
    if (!ptr) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null pointer");
    if (size == 0 || size % granularity)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "size %zu is not a multiple of %llu", size, granularity);
    if (align & (align - 1)) VIOLATION(CUDA_ERROR_INVALID_VALUE, "alignment %zu", align);
    if (flags) VIOLATION(CUDA_ERROR_INVALID_VALUE, "flags %llu", flags);
    (void)addr;
    struct res *r = new_res(K_VA);
    if (!r) END(2, "out of slots");
    r->ptr = fresh_va(size);
    r->size = size;
    r->dev = -1;
    *ptr = r->ptr;
    acquired(r);
    END(CUDA_SUCCESS, "ptr=0x%llx size=%zu", r->ptr, size);
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    BEGIN("cuMemAddressFree", 1);
    struct res *r = find(K_VA, ptr);
    if (!r || r->size != size)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "0x%llx+%zu is not a reservation", ptr, size);
    if (containing(K_MAP, ptr))
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "0x%llx+%zu is still mapped", ptr, size);
    for (int i = 0; i < nres; i++)
        if (res[i].live && res[i].kind == K_MAP && res[i].ptr >= ptr && res[i].ptr - ptr < size)
            VIOLATION(CUDA_ERROR_INVALID_VALUE, "a mapping remains in 0x%llx+%zu", ptr, size);
    released(r);
    END(CUDA_SUCCESS, "ptr=0x%llx size=%zu", ptr, size);
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags) {
    BEGIN("cuMemMap", 1);
    if (offset != 0) VIOLATION(CUDA_ERROR_INVALID_VALUE, "offset %zu, must be 0", offset);
    if (flags) VIOLATION(CUDA_ERROR_INVALID_VALUE, "flags %llu", flags);
    struct res *h = find(K_MEM, handle);
    if (!h) VIOLATION(CUDA_ERROR_INVALID_VALUE, "handle 0x%llx is not held", handle);
    if (size == 0 || size % granularity || ptr % granularity)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "0x%llx+%zu is not granularity-aligned", ptr, size);
    struct res *va = containing(K_VA, ptr);
    if (!va || ptr + size > va->ptr + va->size)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "0x%llx+%zu is not inside a reservation", ptr, size);
    for (int i = 0; i < nres; i++)
        if (res[i].live && res[i].kind == K_MAP && res[i].ptr < ptr + size &&
            ptr < res[i].ptr + res[i].size)
            VIOLATION(CUDA_ERROR_INVALID_VALUE, "0x%llx+%zu overlaps a mapping", ptr, size);
    /* The real size guard: offset + size must lie within the allocation. */
    if (size > h->size) END(CUDA_ERROR_INVALID_VALUE, "size %zu exceeds the allocation (%llu)", size, h->size);
    struct res *r = new_res(K_MAP);
    if (!r) END(2, "out of slots");
    r->ptr = ptr;
    r->size = size;
    r->dev = h->dev;
    r->handle = handle;
    if (h->phys[0]) {
        /* A mapping is a reference to the physical allocation too. */
        snprintf(r->phys, sizeof r->phys, "%s", h->phys);
        r->lock = h->lock;
        r->ref = ref_take(h->lock);
    }
    acquired(r);
    END(CUDA_SUCCESS, "ptr=0x%llx size=%zu handle=0x%llx", ptr, size, handle);
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    BEGIN("cuMemUnmap", 1);
    struct res *r = find(K_MAP, ptr);
    if (!r || r->size != size)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "0x%llx+%zu is not exactly a mapping", ptr, size);
    if (r->ref >= 0) close(r->ref);
    r->ref = -1;
    released(r);
    END(CUDA_SUCCESS, "ptr=0x%llx size=%zu", ptr, size);
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count_) {
    BEGIN("cuMemSetAccess", 1);
    struct res *r = find(K_MAP, ptr);
    if (!r || r->size != size)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "0x%llx+%zu is not exactly a mapping", ptr, size);
    if (!desc || count_ == 0) VIOLATION(CUDA_ERROR_INVALID_VALUE, "no access descriptor");
    for (size_t i = 0; i < count_; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
            desc[i].location.id >= ngpus)
            VIOLATION(CUDA_ERROR_INVALID_VALUE, "location %d/%d", (int)desc[i].location.type,
                      desc[i].location.id);
        int f = (int)desc[i].flags;
        if (f != 0 && f != 1 && f != 3) VIOLATION(CUDA_ERROR_INVALID_VALUE, "access flags %d", f);
        if (f == 1 && no_readonly) END(CUDA_ERROR_NOT_SUPPORTED, "read-only refused (mode)");
        r->access[desc[i].location.id] = f;
    }
    END(CUDA_SUCCESS, "ptr=0x%llx size=%zu dev=%d access=%d", ptr, size, desc[0].location.id,
        (int)desc[0].flags);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    BEGIN("cuMemRelease", 1);
    struct res *r = find(K_MEM, handle);
    if (!r) VIOLATION(CUDA_ERROR_INVALID_VALUE, "handle 0x%llx is not held (double release?)", handle);
    if (--r->refs > 0) {
        /* FAKECUDA_REIMPORT=same: one reference of several. */
        logf_("release\t%s\t0x%llx+%llu", kind_name[r->kind], r->ptr, r->size);
        END(CUDA_SUCCESS, "handle=0x%llx refs=%d", handle, r->refs);
    }
    if (r->memfd >= 0) close(r->memfd);
    r->memfd = -1;
    if (r->ref >= 0) close(r->ref);
    r->ref = -1;
    released(r);
    END(CUDA_SUCCESS, "handle=0x%llx", handle);
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr ptr) {
    BEGIN("cuMemGetAddressRange_v2", 1);
    if (!current_ok()) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "no current context");
    struct res *r = containing(K_IPC, ptr);
    if (!r && containing(K_MAP, ptr)) r = containing(K_VA, ptr);
    if (!r) END(CUDA_ERROR_NOT_FOUND, "0x%llx is not mapped", ptr);
    if (base) *base = r->ptr;
    if (size) *size = (size_t)r->size;
    END(CUDA_SUCCESS, "ptr=0x%llx base=0x%llx size=%llu", ptr, r->ptr, r->size);
}

EXPORT CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr) {
    BEGIN("cuPointerGetAttribute", 1);
    if (!current_ok()) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "no current context");
    if (attribute != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL && attribute != CU_POINTER_ATTRIBUTE_BUFFER_ID &&
        attribute != CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "attribute %d is not implemented", attribute);
    if (!data) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null data");
    struct res *r = containing(K_IPC, ptr);
    if (!r) r = containing(K_MAP, ptr);
    if (!r) END(CUDA_ERROR_INVALID_VALUE, "0x%llx is not mapped", ptr);
    if (attribute == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) {
        *(int *)data = r->dev;
        END(CUDA_SUCCESS, "ptr=0x%llx dev=%d", ptr, r->dev);
    }
    /* Both ids name the physical allocation behind the pointer, or
     * whatever FAKECUDA_BLOCK_ID says this driver answers. */
    const char *mode = getenv("FAKECUDA_BLOCK_ID");
    if (!mode || !*mode) mode = "allocation";
    if ((getenv("FAKECUDA_NO_BLOCK_ID") && *getenv("FAKECUDA_NO_BLOCK_ID") == '1') || !strcmp(mode, "absent"))
        END(CUDA_ERROR_INVALID_VALUE, "attribute %d unknown to this driver (mode)", attribute);
    struct res *of = r->kind == K_MAP ? find(K_MEM, r->handle) : r;
    unsigned long long block = of ? of->block : 0;
    if (!strcmp(mode, "import")) block = of ? of->import_block : 0;
    else if (!strcmp(mode, "constant")) block = 0xc0de0000c0deull;
    else if (!strcmp(mode, "zero")) block = 0;
    else if (strcmp(mode, "allocation")) VIOLATION(CUDA_ERROR_INVALID_VALUE, "FAKECUDA_BLOCK_ID=%s is no mode", mode);
    unsigned long long v = attribute == CU_POINTER_ATTRIBUTE_BUFFER_ID ? block ^ 0x5bd1e9955bd1e995ull : block;
    *(unsigned long long *)data = v;
    END(CUDA_SUCCESS, "ptr=0x%llx attr=%d id=0x%llx", ptr, attribute, v);
}

/* ---- import-side verification: location, access, reading contents ---- */
static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return (v && *v) ? atoi(v) : dflt;
}

EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                       CUmemGenericAllocationHandle handle) {
    BEGIN("cuMemGetAllocationPropertiesFromHandle", 1);
    if (!prop) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null prop");
    struct res *h = find(K_MEM, handle);
    if (!h) VIOLATION(CUDA_ERROR_INVALID_VALUE, "handle 0x%llx is not held", handle);
    memset(prop, 0, sizeof *prop);
    prop->type = (CUmemAllocationType)env_int("FAKECUDA_ALLOC_TYPE", CU_MEM_ALLOCATION_TYPE_PINNED);
    prop->requestedHandleTypes = (CUmemAllocationHandleType)h->htype;
    prop->allocFlags.compressionType = (unsigned char)env_int("FAKECUDA_COMPRESSIBLE", 0);
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = h->dev;
    const char *loc = getenv("FAKECUDA_LOCATION");
    if (loc && *loc) {
        char *end;
        prop->location.type = (CUmemLocationType)strtol(loc, &end, 10);
        if (*end == ':') prop->location.id = (int)strtol(end + 1, &end, 10);
    }
    END(CUDA_SUCCESS, "handle=0x%llx type=%d location=%d/%d", handle, (int)prop->type,
        (int)prop->location.type, prop->location.id);
}

EXPORT CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                               CUdeviceptr ptr) {
    BEGIN("cuMemGetAccess", 1);
    if (!flags || !location) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null pointer");
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE || location->id < 0 || location->id >= ngpus)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "location %d/%d", (int)location->type, location->id);
    struct res *m = containing(K_MAP, ptr);
    if (!m) END(CUDA_ERROR_INVALID_VALUE, "0x%llx is not mapped", ptr);
    int f = m->access[location->id] < 0 ? 0 : m->access[location->id];
    f = env_int("FAKECUDA_ACCESS", f);
    *flags = (unsigned long long)f;
    END(CUDA_SUCCESS, "ptr=0x%llx dev=%d flags=%d", ptr, location->id, f);
}

/* A mapping's access from the current context's device (-1: none). */
static int access_here(const struct res *m) {
    return current ? m->access[current->ordinal] : -1;
}

static unsigned char pattern(int seed, unsigned long long o) {
    return (unsigned char)((o * 131ull) ^ (o >> 9) ^ (unsigned long long)seed);
}

/* ======================================================================
 * Owner side: the calls a KV-cache owner makes (scripts/gpu-proof-owner.c
 * run against this fake by tests/it/import/gpu_proof.rs), plus the environment a
 * real driver reads. Kept apart from the importer's entry points above.
 *
 *   FAKECUDA_STATE=DIR   shared by the owner and every importer: an owner's
 *                        cuIpcGetMemHandle / fabric export appends
 *                        "HEX:DEV:SIZE" to DIR/ipc or DIR/fabric, and
 *                        cuMemAlloc memory lives in the file DIR/mem-N, so
 *                        another process opening that IPC handle reads the
 *                        owner's bytes. Importers load both lists at start.
 *   CUDA_VISIBLE_DEVICES as the driver reads it: ordinals or UUIDs (GPU-
 *                        prefix, or a unique leading part), the list stops at
 *                        the first entry naming no single device; no device at all
 *                        makes cuInit answer CUDA_ERROR_NO_DEVICE (100).
 *   FAKECUDA_NO_FABRIC=1 the fabric attribute is 0 and fabric export 801.
 *   Built with -DFAKECUDA_AS_STUB it is the toolkit's stub (as FAKECUDA_STUB=1).
 *
 * Memory is modelled: cuMemCreate makes a memfd "fakecuda-devN" (what the
 * importer side takes as device N's posix_fd memory), cuMemAlloc a file;
 * cuMemcpyHtoD/DtoH copy into and out of them through the owner's
 * pointers, the owner's VMM mappings, an IPC mapping of an owner's handle,
 * and an importer's mapping of a posix_fd allocation. A write through a
 * mapping whose access is not read-write fails with
 * CUDA_ERROR_ILLEGAL_ADDRESS (700), and the context stays broken (every
 * later copy and cuCtxSynchronize answer 700), as a real fault does.
 * ==================================================================== */
#include <sys/mman.h>

#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_ILLEGAL_ADDRESS 700
#define CU_DEVICE_ATTRIBUTE_COMPUTE_MODE 20
#define CU_DEVICE_ATTRIBUTE_VMM_SUPPORTED 102
#define CU_DEVICE_ATTRIBUTE_POSIX_FD_SUPPORTED 103
#define CU_DEVICE_ATTRIBUTE_FABRIC_SUPPORTED 128

struct owned {
    int live;
    int vmm;                   /* 1: cuMemCreate handle (or an import); 0: cuMemAlloc */
    unsigned long long key;    /* vmm: the handle; alloc: the device pointer */
    unsigned long long size;
    int dev;
    int fd;
    unsigned char *bytes;      /* the memory, mapped shared */
    unsigned char ipc[64];     /* alloc: its IPC handle, once asked */
    int has_ipc;
    char phys[40];             /* its physical allocation (FAKECUDA_STATE), "" none */
    long long lock;
    int ref;                   /* alloc: the reference cuMemFree drops, else -1 */
};
static struct owned owned[256];
static int nowned;
static int sticky_fault;
static long next_owned_id;

static void append_list(const char *env, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    if (!buf) { fclose(f); return; }
    buf[0] = 0;
    const char *old = getenv(env);
    if (old && *old) len = (size_t)snprintf(buf, cap, "%s", old);
    while (fgets(line, sizeof line, f) && len + strlen(line) + 2 < cap) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? "," : "", line);
    }
    fclose(f);
    setenv(env, buf, 1);
    free(buf);
}

/* Does CUDA_VISIBLE_DEVICES entry `e` (length n) name GPU `u` (as given in
 * FAKECUDA_GPUS, length un) at ordinal i? */
static int cvd_names(const char *e, size_t n, const char *u, size_t un, int i) {
    char num[16];
    if (n > 0 && n < sizeof num && strspn(e, "0123456789") >= n) {
        memcpy(num, e, n);
        num[n] = 0;
        return atoi(num) == i;
    }
    const char *ub = u;
    size_t ubn = un;
    if (ubn >= 4 && (!strncmp(ub, "GPU-", 4) || !strncmp(ub, "MIG-", 4))) { ub += 4; ubn -= 4; }
    const char *eb = e;
    size_t ebn = n;
    if (ebn >= 4 && (!strncmp(eb, "GPU-", 4) || !strncmp(eb, "MIG-", 4))) { eb += 4; ebn -= 4; }
    return ebn > 0 && ebn <= ubn && !strncasecmp(eb, ub, ebn);
}

static void apply_visible_devices(void) {
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd) return;
    const char *all = getenv("FAKECUDA_GPUS");
    if (!all) all = "";
    char out[4096];
    size_t len = 0;
    out[0] = 0;
    const char *e = cvd;
    while (*e) {
        size_t n = strcspn(e, ",");
        /* An entry must name exactly one device (a prefix two UUIDs share
         * names none); the driver stops at the first that does not. */
        int found = 0;
        const char *hit = NULL;
        size_t hitn = 0;
        const char *u = all;
        for (int i = 0; *u; i++) {
            size_t un = strcspn(u, ",");
            if (cvd_names(e, n, u, un, i)) {
                found++;
                hit = u;
                hitn = un;
            }
            u += un;
            if (*u == ',') u++;
        }
        if (found != 1) break;
        if (len + hitn + 2 < sizeof out)
            len += (size_t)snprintf(out + len, sizeof out - len, "%s%.*s", len ? "," : "", (int)hitn, hit);
        e += n;
        if (*e == ',') e++;
    }
    setenv("FAKECUDA_GPUS", out, 1);
    if (len == 0) {
        /* No visible device: cuInit answers CUDA_ERROR_NO_DEVICE. */
        const char *f = getenv("FAKECUDA_FAIL");
        char rules[1024];
        snprintf(rules, sizeof rules, "%s%scuInit:1:%d", f && *f ? f : "", f && *f ? "," : "",
                 CUDA_ERROR_NO_DEVICE);
        setenv("FAKECUDA_FAIL", rules, 1);
    }
}

/* Runs before setup() (which reads the variables it rewrites). */
__attribute__((constructor(101))) static void fakeowner_setup(void) {
#ifdef FAKECUDA_AS_STUB
    setenv("FAKECUDA_STUB", "1", 1);
#endif
    apply_visible_devices();
    const char *st = getenv("FAKECUDA_STATE");
    if (st && *st) {
        char p[4096];
        snprintf(p, sizeof p, "%s/ipc", st);
        append_list("FAKECUDA_IPC", p);
        snprintf(p, sizeof p, "%s/fabric", st);
        append_list("FAKECUDA_FABRIC", p);
    }
}

static int no_fabric(void) {
    return getenv("FAKECUDA_NO_FABRIC") && *getenv("FAKECUDA_NO_FABRIC") == '1';
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    BEGIN("cuDeviceGetName", 1);
    int o = ordinal_of(dev);
    if (!name || len <= 0) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null name");
    if (o < 0) VIOLATION(CUDA_ERROR_INVALID_DEVICE, "device handle %d", dev);
    snprintf(name, (size_t)len, "fakecuda GPU %d", o);
    END(CUDA_SUCCESS, "dev=%d", o);
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev) {
    BEGIN("cuDeviceGetAttribute", 1);
    int o = ordinal_of(dev);
    if (!v) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null value");
    if (o < 0) VIOLATION(CUDA_ERROR_INVALID_DEVICE, "device handle %d", dev);
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *v = env_int("FAKECUDA_COMPUTE_MODE", 0); break;
    case CU_DEVICE_ATTRIBUTE_VMM_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_POSIX_FD_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_FABRIC_SUPPORTED: *v = !no_fabric(); break;
    default: END(CUDA_ERROR_INVALID_VALUE, "attribute %d is not modelled", attr);
    }
    END(CUDA_SUCCESS, "dev=%d attr=%d value=%d", o, attr, *v);
}

/* file: back the memory with a file in FAKECUDA_STATE (cuMemAlloc memory,
 * and fabric-only VMM memory), so another process can map it by handle. */
static struct owned *new_owned(int vmm, int file, unsigned long long size, int dev) {
    if (nowned >= 256) return NULL;
    struct owned *o = &owned[nowned];
    memset(o, 0, sizeof *o);
    o->ref = -1;
    char name[64];
    if (!state_dir()) {
        /* Nowhere to share it: memory of this process only. */
        snprintf(name, sizeof name, vmm ? "fakecuda-dev%d" : "fakecuda-alloc-dev%d", dev);
        o->fd = memfd_create(name, MFD_CLOEXEC);
    } else {
        /* One physical allocation, shared through FAKECUDA_STATE. */
        char p[4096], line[256];
        snprintf(o->phys, sizeof o->phys, "%d-%ld", (int)getpid(), ++next_owned_id);
        snprintf(name, sizeof name, "mem-%s", o->phys);
        state_path(p, sizeof p, name);
        o->fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        o->lock = fresh_lock();
        snprintf(line, sizeof line, "alloc %s %lld %d %llu\n", o->phys, o->lock, dev, size);
        state_append("alloc", line);
        /* cuMemAlloc memory is referenced until cuMemFree; a VMM
         * allocation by its handle (cuMemCreate's res). */
        if (!vmm) o->ref = ref_take(o->lock);
    }
    (void)file;
    if (o->fd < 0) return NULL;
    if (ftruncate(o->fd, (off_t)size) != 0) { close(o->fd); return NULL; }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, o->fd, 0);
    if (p == MAP_FAILED) { close(o->fd); return NULL; }
    o->bytes = p;
    o->live = 1;
    o->vmm = vmm;
    o->size = size;
    o->dev = dev;
    nowned++;
    return o;
}

static struct owned *owned_handle(unsigned long long h) {
    for (int i = nowned - 1; i >= 0; i--)
        if (owned[i].live && owned[i].vmm && owned[i].key == h) return &owned[i];
    return NULL;
}

static void hexs(const unsigned char *b, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

/* Names the file backing `o` DIR/TAG-HEX (the handle's bytes), for
 * importers in other processes; -1 when it has no path (a memfd). */
static int link_backing(struct owned *o, const char *tag, const unsigned char *bytes) {
    const char *st = getenv("FAKECUDA_STATE");
    char from[4096], to[4096], hx[129];
    if (!st) return -1;
    hexs(bytes, 64, hx);
    snprintf(from, sizeof from, "%s/%s-%s", st, tag, hx);
    if (o->phys[0]) {
        /* Named by its allocation, so an importer finds its reference lock. */
        snprintf(to, sizeof to, "mem-%s", o->phys);
        return symlink(to, from) == 0 || errno == EEXIST ? 0 : -1;
    }
    return -1; /* a memfd of this process only: nothing to name */
}

/* Maps DIR/TAG-HEX: the owner's memory behind a handle; NULL if none. */
static struct owned *map_named(const char *tag, const unsigned char *bytes, unsigned long long key,
                               int vmm) {
    const char *st = getenv("FAKECUDA_STATE");
    char p[4096], hx[129];
    if (!st || !*st || nowned >= 256) return NULL;
    hexs(bytes, 64, hx);
    snprintf(p, sizeof p, "%s/%s-%s", st, tag, hx);
    int fd = open(p, O_RDWR | O_CLOEXEC);
    struct stat sb;
    if (fd < 0) return NULL;
    if (fstat(fd, &sb) != 0 || sb.st_size <= 0) { close(fd); return NULL; }
    void *b = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b == MAP_FAILED) return NULL;
    struct owned *o = &owned[nowned++];
    memset(o, 0, sizeof *o);
    o->live = 1;
    o->vmm = vmm;
    o->key = key;
    o->size = (unsigned long long)sb.st_size;
    o->fd = -1;
    o->bytes = b;
    return o;
}

static void fakeowner_imported_fabric(unsigned long long handle, const unsigned char *bytes) {
    map_named("fab", bytes, handle, 1);
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags) {
    BEGIN("cuMemCreate", 1);
    if (!handle || !prop) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null pointer");
    if (flags) VIOLATION(CUDA_ERROR_INVALID_VALUE, "flags %llu", flags);
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "prop.type %d", (int)prop->type);
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= ngpus)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "prop.location %d/%d", (int)prop->location.type,
                  prop->location.id);
    if (size == 0 || size % granularity)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "size %zu is not a multiple of %llu", size, granularity);
    if ((prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) && no_fabric())
        END(CUDA_ERROR_NOT_SUPPORTED, "fabric handles are not supported (mode)");
    int fabric_only = (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) &&
                      !(prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    struct owned *o = new_owned(1, fabric_only, size, prop->location.id);
    struct res *r = o ? new_res(K_MEM) : NULL;
    if (!r) END(2, "out of slots or memory");
    r->ptr = next_handle++;
    r->size = size;
    r->dev = prop->location.id;
    if (o->phys[0]) {
        /* The owner's handle is its first reference. */
        snprintf(r->phys, sizeof r->phys, "%s", o->phys);
        r->lock = o->lock;
        r->ref = ref_take(o->lock);
        r->block = block_of_id(o->phys);
    }
    o->key = r->ptr;
    *handle = r->ptr;
    acquired(r);
    END(CUDA_SUCCESS, "handle=0x%llx size=%zu dev=%d types=%d", r->ptr, size, r->dev,
        (int)prop->requestedHandleTypes);
}

static int register_handle(const char *list, const unsigned char *bytes, int dev,
                           unsigned long long size) {
    const char *st = getenv("FAKECUDA_STATE");
    if (!st || !*st) return -1;
    char p[4096], h[129];
    snprintf(p, sizeof p, "%s/%s", st, list);
    hexs(bytes, 64, h);
    int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    char line[256];
    int n = snprintf(line, sizeof line, "%s:%d:%llu\n", h, dev, size);
    ssize_t w = write(fd, line, (size_t)n);
    close(fd);
    return w == n ? 0 : -1;
}

static void fresh_handle_bytes(unsigned char *b, const char *tag) {
    memset(b, 0, 64);
    snprintf((char *)b, 16, "%s", tag);
    unsigned long long t = (unsigned long long)time(NULL), pid = (unsigned long long)getpid();
    unsigned long long n = (unsigned long long)++next_owned_id;
    memcpy(b + 16, &pid, 8);
    memcpy(b + 24, &t, 8);
    memcpy(b + 32, &n, 8);
    for (int i = 40; i < 64; i++) b[i] = (unsigned char)(b[i - 40] * 31 + i);
}

EXPORT CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle handle,
                                             CUmemAllocationHandleType type, unsigned long long flags) {
    BEGIN("cuMemExportToShareableHandle", 1);
    if (!out) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null output");
    if (flags) VIOLATION(CUDA_ERROR_INVALID_VALUE, "flags %llu", flags);
    struct owned *o = owned_handle(handle);
    if (!o || !find(K_MEM, handle)) END(CUDA_ERROR_INVALID_VALUE, "handle 0x%llx is not held", handle);
    if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        /* The driver's shape: a fresh open file of a character device per
         * export, whose identity says nothing about the allocation. */
        if (!o->phys[0]) END(CUDA_ERROR_NOT_SUPPORTED, "no FAKECUDA_STATE to share the allocation through");
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd < 0) END(2, "open /dev/null: %s", strerror(errno));
        long long at = fresh_lock();
        if (lock_byte(fd, o->lock) != 0 || lock_byte(fd, at) != 0) {
            close(fd);
            END(2, "lock: %s", strerror(errno));
        }
        char line[128];
        snprintf(line, sizeof line, "export %lld %s\n", at, o->phys);
        state_append("exports", line);
        *(int *)out = fd;
        END(CUDA_SUCCESS, "handle=0x%llx fd=%d", handle, fd);
    }
    if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
        if (no_fabric()) END(CUDA_ERROR_NOT_SUPPORTED, "fabric handles are not supported (mode)");
        CUmemFabricHandle *fh = out;
        fresh_handle_bytes(fh->data, "fakecuda-fab");
        if (register_handle("fabric", fh->data, o->dev, o->size) != 0)
            END(CUDA_ERROR_NOT_SUPPORTED, "no FAKECUDA_STATE to register the fabric handle in");
        link_backing(o, "fab", fh->data); /* a memfd (also posix_fd) has no path: not linked */
        END(CUDA_SUCCESS, "handle=0x%llx fabric", handle);
    }
    VIOLATION(CUDA_ERROR_INVALID_VALUE, "handle type %d", (int)type);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t size) {
    BEGIN("cuMemAlloc_v2", 1);
    if (!ptr) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null pointer");
    if (!current_ok()) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "no current context");
    if (size == 0) END(CUDA_ERROR_INVALID_VALUE, "size 0");
    struct owned *o = new_owned(0, 1, size, current->ordinal);
    if (!o) END(2, "out of memory");
    o->key = fresh_va(size);
    *ptr = o->key;
    END(CUDA_SUCCESS, "ptr=0x%llx size=%zu dev=%d", o->key, size, o->dev);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
    BEGIN("cuMemFree_v2", 1);
    for (int i = 0; i < nowned; i++)
        if (owned[i].live && !owned[i].vmm && owned[i].key == ptr) {
            munmap(owned[i].bytes, owned[i].size);
            close(owned[i].fd);
            if (owned[i].ref >= 0) close(owned[i].ref);
            owned[i].ref = -1;
            owned[i].live = 0;
            END(CUDA_SUCCESS, "ptr=0x%llx", ptr);
        }
    VIOLATION(CUDA_ERROR_INVALID_VALUE, "0x%llx is not a cuMemAlloc pointer", ptr);
}

EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr ptr) {
    BEGIN("cuIpcGetMemHandle", 1);
    if (!h) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null handle");
    for (int i = 0; i < nowned; i++) {
        struct owned *o = &owned[i];
        if (!o->live || o->vmm || ptr < o->key || ptr - o->key >= o->size) continue;
        if (!o->has_ipc) {
            fresh_handle_bytes(o->ipc, "fakecuda-ipc");
            if (register_handle("ipc", o->ipc, o->dev, o->size) != 0)
                END(CUDA_ERROR_NOT_SUPPORTED, "no FAKECUDA_STATE to register the IPC handle in");
            if (link_backing(o, "ipc", o->ipc) != 0) END(2, "cannot name the memory of 0x%llx", ptr);
            o->has_ipc = 1;
        }
        memcpy(h->reserved, o->ipc, 64);
        END(CUDA_SUCCESS, "ptr=0x%llx", ptr);
    }
    END(CUDA_ERROR_INVALID_VALUE, "0x%llx is not a cuMemAlloc pointer", ptr);
}

/* Where `ptr` (n bytes) lands: host bytes and whether writes are allowed;
 * NULL when the memory is not modelled, *bad = 1 when not mapped at all. */
static unsigned char *locate(unsigned long long ptr, size_t n, int *writable, int *bad) {
    *bad = 0;
    *writable = 1;
    for (int i = 0; i < nowned; i++) {
        struct owned *o = &owned[i];
        if (o->live && !o->vmm && ptr >= o->key && ptr - o->key < o->size) {
            if (n > o->size - (ptr - o->key)) break;
            return o->bytes + (ptr - o->key);
        }
    }
    struct res *m = containing(K_MAP, ptr);
    if (m) {
        int a = access_here(m);
        *writable = a == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        if (a < 1 || n > m->size - (ptr - m->ptr)) { *bad = 1; return NULL; }
        struct owned *o = owned_handle(m->handle);
        if (!o || ptr - m->ptr + n > o->size) return NULL;
        return o->bytes + (ptr - m->ptr);
    }
    struct res *ipc = containing(K_IPC, ptr);
    if (ipc) {
        if (n > ipc->size - (ptr - ipc->ptr)) { *bad = 1; return NULL; }
        for (int i = 0; i < nowned; i++)
            if (owned[i].live && !owned[i].vmm && owned[i].key == ipc->ptr)
                return owned[i].bytes + (ptr - ipc->ptr);
        struct owned *o = map_named("ipc", ipc->bytes, ipc->ptr, 0);
        if (!o || ptr - ipc->ptr + n > o->size) return NULL;
        return o->bytes + (ptr - ipc->ptr);
    }
    *bad = 1;
    return NULL;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    BEGIN("cuMemcpyHtoD_v2", 1);
    if (!current_ok()) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "no current context");
    if (sticky_fault) END(CUDA_ERROR_ILLEGAL_ADDRESS, "the context faulted earlier");
    int w, bad;
    unsigned char *p = locate(dst, n, &w, &bad);
    if (bad || (!w && (p || containing(K_MAP, dst)))) {
        sticky_fault = 1;
        END(CUDA_ERROR_ILLEGAL_ADDRESS, "write to 0x%llx+%zu: %s", dst, n, bad ? "not mapped" : "read-only");
    }
    if (!p) END(CUDA_ERROR_NOT_SUPPORTED, "0x%llx: memory not modelled", dst);
    memcpy(p, src, n);
    END(CUDA_SUCCESS, "dst=0x%llx n=%zu", dst, n);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    BEGIN("cuMemcpyDtoH_v2", 1);
    if (!current_ok()) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "no current context");
    if (!dst) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null destination");
    if (sticky_fault) END(CUDA_ERROR_ILLEGAL_ADDRESS, "the context faulted earlier");
    {
        /* The owner side's memory first: its pointers and mappings, and
         * handles an owner process made (their bytes are the owner's, not
         * the pattern below). */
        int w, bad;
        unsigned char *p = locate(src, n, &w, &bad);
        if (p) {
            memcpy(dst, p, n);
            END(CUDA_SUCCESS, "src=0x%llx n=%zu owner memory", src, n);
        }
    }
    struct res *r = containing(K_IPC, src);
    struct res *mem = NULL;
    unsigned long long off;
    if (r) {
        off = src - r->ptr;
        if (n > r->size - off) END(CUDA_ERROR_INVALID_VALUE, "0x%llx+%zu leaves the IPC mapping", src, n);
    } else {
        r = containing(K_MAP, src);
        if (!r) END(CUDA_ERROR_INVALID_VALUE, "0x%llx is not mapped", src);
        if (access_here(r) < 1)
            VIOLATION(CUDA_ERROR_INVALID_VALUE, "read of 0x%llx without access from dev%d (cuMemSetAccess is per device)",
                      src, current ? current->ordinal : -1);
        off = src - r->ptr;
        if (n > r->size - off) END(CUDA_ERROR_INVALID_VALUE, "0x%llx+%zu leaves the mapping", src, n);
        mem = find(K_MEM, r->handle);
        if (!mem) VIOLATION(CUDA_ERROR_INVALID_VALUE, "the mapping's handle is released");
    }
    if (mem && mem->memfd >= 0) {
        ssize_t got = pread(mem->memfd, dst, n, (off_t)off);
        if (got != (ssize_t)n) END(CUDA_ERROR_INVALID_VALUE, "memfd read of %zu at %llu: %zd", n, off, got);
    } else {
        int seed = mem ? mem->seed : r->seed;
        for (size_t i = 0; i < n; i++) ((unsigned char *)dst)[i] = pattern(seed, off + i);
    }
    END(CUDA_SUCCESS, "src=0x%llx n=%zu off=%llu", src, n, off);
}

EXPORT CUresult cuCtxSynchronize(void) {
    BEGIN("cuCtxSynchronize", 1);
    if (!current_ok()) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "no current context");
    if (sticky_fault) END(CUDA_ERROR_ILLEGAL_ADDRESS, "the context faulted earlier");
    END(CUDA_SUCCESS, "ok");
}

/* Device memory in use: every physical allocation on the current device
 * (FAKECUDA_STATE, any process) that some reference still keeps. */
EXPORT CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) {
    BEGIN("cuMemGetInfo_v2", 1);
    if (!current_ok()) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "no current context");
    if (!free_ || !total) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null pointer");
    unsigned long long all = 80ull << 30, used = 0;
    if (getenv("FAKECUDA_MEM_TOTAL")) all = strtoull(getenv("FAKECUDA_MEM_TOTAL"), NULL, 10);
    char p[4096], line[256];
    state_path(p, sizeof p, "alloc");
    FILE *f = state_dir() ? fopen(p, "re") : NULL;
    while (f && fgets(line, sizeof line, f)) {
        struct phys q;
        if (sscanf(line, "alloc %39s %lld %d %llu", q.id, &q.lock, &q.dev, &q.size) == 4 &&
            q.dev == current->ordinal && phys_live(&q))
            used += q.size;
    }
    if (f) fclose(f);
    *total = (size_t)all;
    *free_ = (size_t)(used > all ? 0 : all - used);
    END(CUDA_SUCCESS, "dev=%d used=%llu total=%llu", current->ordinal, used, all);
}
