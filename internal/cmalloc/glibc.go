//go:build cgo && linux

package cmalloc

/*
#include <malloc.h>
#include <stdlib.h>

static int strata_glibc(void) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
	return 1;
#else
	return 0;
#endif
}

static int strata_mallopt(int param, int value) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
	return mallopt(param, value);
#else
	return 0;
#endif
}

static int strata_param(int which) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
	return which == 0 ? M_ARENA_MAX : M_MMAP_THRESHOLD;
#else
	return 0;
#endif
}

// strata_hugetlb_tunable says whether this glibc knows the tunable
// glibc.malloc.hugetlb (2.35 and later).
static int strata_hugetlb_tunable(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
	return 1;
#else
	return 0;
#endif
}

// strata_touched allocates n bytes and writes one byte in every 4 KiB
// page of them, so that the kernel backs the whole block.
static void *strata_touched(size_t n) {
	char *p = malloc(n);
	if (p == NULL) return NULL;
	for (size_t i = 0; i < n; i += 4096) ((volatile char *)p)[i] = 1;
	return p;
}

// strata_mapped_during allocates n bytes, reads how many bytes malloc
// holds in mappings of their own, frees the block and returns the count.
static size_t strata_mapped_during(size_t n) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	void *p = malloc(n);
	if (p == NULL) return 0;
	((volatile char *)p)[0] = 1;
	struct mallinfo2 mi = mallinfo2();
	free(p);
	return mi.hblkhd;
#else
	return 0;
#endif
}
*/
import "C"

var available = C.strata_glibc() == 1

// hugeTLBKnown: this glibc reads the tunable glibc.malloc.hugetlb.
var hugeTLBKnown = C.strata_hugetlb_tunable() == 1

func setArenaMax(n int) bool {
	return C.strata_mallopt(C.strata_param(0), C.int(n)) == 1
}

func setMmapThreshold(n int) bool {
	return C.strata_mallopt(C.strata_param(1), C.int(n)) == 1
}

// mappedDuring allocates n bytes with malloc and returns the bytes malloc
// held in blocks mapped on their own while the block was live, for tests.
func mappedDuring(n int) int {
	return int(C.strata_mapped_during(C.size_t(n)))
}

// touchedBlock allocates n bytes with malloc and writes every page of
// them; free releases the block. For tests.
func touchedBlock(n int) (free func()) {
	p := C.strata_touched(C.size_t(n))
	return func() { C.free(p) }
}
