/* How the kernels' entry points share their work among threads: each splits its range [b0, b1)
   (of contexts, or of blocks of contexts) into one contiguous part per thread of an OpenMP team of
   `threads`. Built with -fopenmp and loaded into a process where torch has already loaded libgomp,
   the kernels use torch's own libgomp (the same soname), so their team is torch's thread pool:
   threads already awake from torch's last operation, and no second pool competing with them for
   the cores. Built without OpenMP, the pragma is ignored and the one caller's thread takes the
   whole range (icl.core.accel.native then splits it among Python threads instead: uses_openmp). Results do not
   depend on the split: the gradients are summed over fixed blocks of contexts (sum_blocks). */
#ifndef ICL_THREADS_H
#define ICL_THREADS_H
#ifdef _OPENMP
#include <omp.h>
#endif

/* This thread's part [*lo, *hi) of [b0, b1): near-equal contiguous parts, in thread order. */
static inline void thread_range(int b0, int b1, int *lo, int *hi) {
#ifdef _OPENMP
    int64_t n = b1 - b0, i = omp_get_thread_num(), t = omp_get_num_threads();
#else
    int64_t n = b1 - b0, i = 0, t = 1;
#endif
    *lo = b0 + (int)(n * i / t);
    *hi = b0 + (int)(n * (i + 1) / t);
}

/* Whether this library was built with OpenMP (its entry points then split their own work). */
int uses_openmp(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}
#endif
