/*
 * Self-test of the fake driver's rules: breaks each rule once, through the
 * same entry points kvcr uses, so tests/it/import/fakecuda.rs can check that the fake
 * reports every one as a `violation` (a fake that accepted anything would
 * make "no violation" in kvcr's runs meaningless). Linked against the fake.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef void *CUcontext;
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

CUresult cuInit(unsigned int);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *, void *, int);
CUresult cuMemGetAllocationGranularity(size_t *, const CUmemAllocationProp *, int);
CUresult cuMemAddressReserve(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemAddressFree(CUdeviceptr, size_t);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
CUresult cuMemRelease(CUmemGenericAllocationHandle);

#define CHECK(label, expr, want)                                                     \
    do {                                                                             \
        CUresult r_ = (expr);                                                        \
        printf("%s\t%d\n", label, r_);                                               \
        if ((want) >= 0 && r_ != (want)) {                                           \
            fprintf(stderr, "%s: got %d, want %d\n", label, r_, (want));             \
            return 1;                                                                \
        }                                                                            \
    } while (0)

int main(int argc, char **argv) {
    (void)argc;
    int n = 0;
    CHECK("count-before-init", cuDeviceGetCount(&n), 3);
    CHECK("init", cuInit(0), 0);
    CUdevice dev = 0;
    CHECK("get", cuDeviceGet(&dev, 0), 0);
    CUcontext ctx = 0;
    CHECK("retain-by-ordinal", cuDevicePrimaryCtxRetain(&ctx, 0), 101);
    CHECK("release-unretained", cuDevicePrimaryCtxRelease_v2(dev), 201);
    CHECK("retain", cuDevicePrimaryCtxRetain(&ctx, dev), 0);
    CHECK("set-current", cuCtxSetCurrent(ctx), 0);
    CUmemFabricHandle fh;
    memset(&fh, 0, sizeof fh);
    for (int i = 0; i < 64 && argv[1] && argv[1][2 * i]; i++) {
        unsigned v = 0;
        sscanf(argv[1] + 2 * i, "%2x", &v);
        fh.data[i] = (unsigned char)v;
    }
    CUmemGenericAllocationHandle h = 0;
    CHECK("import", cuMemImportFromShareableHandle(&h, &fh, 8), 0);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    size_t g = 0;
    CHECK("granularity-bad-prop", cuMemGetAllocationGranularity(&g, &prop, 0), 1);
    prop.type = 1;
    prop.location.type = 1;
    prop.location.id = 0;
    CHECK("granularity", cuMemGetAllocationGranularity(&g, &prop, 0), 0);
    CUdeviceptr va = 0;
    CHECK("reserve-unaligned", cuMemAddressReserve(&va, g + 1, 0, 0, 0), 1);
    CHECK("reserve", cuMemAddressReserve(&va, 2 * g, 0, 0, 0), 0);
    CHECK("map-offset", cuMemMap(va, g, 4096, h, 0), 1);
    CHECK("map-outside", cuMemMap(va + 2 * g, g, 0, h, 0), 1);
    CHECK("map", cuMemMap(va, g, 0, h, 0), 0);
    CHECK("map-overlap", cuMemMap(va, g, 0, h, 0), 1);
    CUmemAccessDesc d = {{1, 0}, 2};
    CHECK("access-flags-2", cuMemSetAccess(va, g, &d, 1), 1);
    d.flags = 1;
    CHECK("access-not-a-mapping", cuMemSetAccess(va, 2 * g, &d, 1), 1);
    CHECK("access", cuMemSetAccess(va, g, &d, 1), 0);
    CHECK("free-while-mapped", cuMemAddressFree(va, 2 * g), 1);
    CHECK("unmap-wrong-size", cuMemUnmap(va, 2 * g), 1);
    CHECK("unmap", cuMemUnmap(va, g), 0);
    CHECK("unmap-twice", cuMemUnmap(va, g), 1);
    CHECK("free-wrong-size", cuMemAddressFree(va, g), 1);
    CHECK("free", cuMemAddressFree(va, 2 * g), 0);
    CHECK("release", cuMemRelease(h), 0);
    CHECK("release-twice", cuMemRelease(h), 1);
    CHECK("ctx-release", cuDevicePrimaryCtxRelease_v2(dev), 0);
    CHECK("set-released-ctx", cuCtxSetCurrent(ctx), 201);
    return 0;
}
