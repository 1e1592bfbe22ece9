/*
 * fakecuda: an ABI-level fake of the CUDA driver (libcuda.so.1) for kvcr's
 * tests (tests/it/fakecuda.rs). It implements the driver entry points kvcr
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
 *                              drivers: v1 answers P)
 *   FAKECUDA_IPC=HEX:DEV:SIZE[:ALIAS],...  importable cuda_ipc handles (128 hex);
 *                              handles with one nonzero ALIAS are one exported
 *                              allocation (they open at one pointer). As the
 *                              driver documents, opening a handle already open
 *                              in the context returns the existing pointer and
 *                              counts a reference; each close drops one.
 *   FAKECUDA_FABRIC=HEX:DEV:SIZE,...  importable fabric handles
 *     posix_fd handles: a memfd named "fakecuda-devN" is device N's memory,
 *     its size is the allocation's size.
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
 * Memory contents (cuMemcpyDtoH_v2 reads them; nothing writes them): a
 * posix_fd allocation's bytes are its memfd's; cuda_ipc and fabric memory
 * holds byte (o * 131) ^ (o >> 9) ^ SEED at offset o, SEED the first handle
 * byte (kvcr's sim_byte, src/import/sim.rs).
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
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9

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
    int access;              /* map: access flags set, -1 none */
    unsigned char bytes[64]; /* ipc: the handle bytes */
    int refs;                /* ipc: opens not yet closed */
    int memfd;               /* mem (posix_fd): our dup of the memfd, else -1 */
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
        for (int k = 0; res[i].live && k < (res[i].kind == K_IPC ? res[i].refs : 1); k++)
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
    r->access = -1;
    r->memfd = -1;
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

static int memfd_device(int fd, unsigned long long *size) {
    char link[64], target[256];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) return -1;
    target[n] = 0;
    const char *p = strstr(target, "fakecuda-dev");
    if (!p) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    *size = (unsigned long long)st.st_size;
    return atoi(p + strlen("fakecuda-dev"));
}

#ifndef FAKECUDA_OLD_DRIVER /* -DFAKECUDA_OLD_DRIVER: a driver without VMM import */
EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os,
                                               CUmemAllocationHandleType type) {
    BEGIN("cuMemImportFromShareableHandle", 1);
    if (!handle) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null handle pointer");
    int dev = -1, seed = 0, memfd = -1;
    unsigned long long size = 0;
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
    } else if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        int fd = (int)(intptr_t)os;
        dev = memfd_device(fd, &size);
        if (dev < 0) END(CUDA_ERROR_INVALID_VALUE, "fd %d is not a fake allocation", fd);
        /* The driver keeps the memory, not the caller's fd: so does the fake. */
        memfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    } else {
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "handle type %d", (int)type);
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
    *handle = r->ptr;
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
    *g = (size_t)granularity;
    END(CUDA_SUCCESS, "dev=%d handle_types=%d granularity=%llu", prop->location.id,
        (int)prop->requestedHandleTypes, granularity);
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
    acquired(r);
    END(CUDA_SUCCESS, "ptr=0x%llx size=%zu handle=0x%llx", ptr, size, handle);
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    BEGIN("cuMemUnmap", 1);
    struct res *r = find(K_MAP, ptr);
    if (!r || r->size != size)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "0x%llx+%zu is not exactly a mapping", ptr, size);
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
        r->access = f;
    }
    END(CUDA_SUCCESS, "ptr=0x%llx size=%zu dev=%d access=%d", ptr, size, desc[0].location.id,
        (int)desc[0].flags);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    BEGIN("cuMemRelease", 1);
    struct res *r = find(K_MEM, handle);
    if (!r) VIOLATION(CUDA_ERROR_INVALID_VALUE, "handle 0x%llx is not held (double release?)", handle);
    if (r->memfd >= 0) close(r->memfd);
    r->memfd = -1;
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
    if (attribute != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
        VIOLATION(CUDA_ERROR_INVALID_VALUE, "attribute %d is not implemented", attribute);
    if (!data) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null data");
    struct res *r = containing(K_IPC, ptr);
    if (!r) r = containing(K_MAP, ptr);
    if (!r) END(CUDA_ERROR_INVALID_VALUE, "0x%llx is not mapped", ptr);
    *(int *)data = r->dev;
    END(CUDA_SUCCESS, "ptr=0x%llx dev=%d", ptr, r->dev);
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
    int f = m->access < 0 ? 0 : m->access;
    f = env_int("FAKECUDA_ACCESS", f);
    *flags = (unsigned long long)f;
    END(CUDA_SUCCESS, "ptr=0x%llx dev=%d flags=%d", ptr, location->id, f);
}

static unsigned char pattern(int seed, unsigned long long o) {
    return (unsigned char)((o * 131ull) ^ (o >> 9) ^ (unsigned long long)seed);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    BEGIN("cuMemcpyDtoH_v2", 1);
    if (!current_ok()) VIOLATION(CUDA_ERROR_INVALID_CONTEXT, "no current context");
    if (!dst) VIOLATION(CUDA_ERROR_INVALID_VALUE, "null destination");
    struct res *r = containing(K_IPC, src);
    struct res *mem = NULL;
    unsigned long long off;
    if (r) {
        off = src - r->ptr;
        if (n > r->size - off) END(CUDA_ERROR_INVALID_VALUE, "0x%llx+%zu leaves the IPC mapping", src, n);
    } else {
        r = containing(K_MAP, src);
        if (!r) END(CUDA_ERROR_INVALID_VALUE, "0x%llx is not mapped", src);
        if (r->access < 1) VIOLATION(CUDA_ERROR_INVALID_VALUE, "read of 0x%llx before cuMemSetAccess", src);
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
