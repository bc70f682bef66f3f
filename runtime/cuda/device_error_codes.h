/* runtime/cuda/device_error_codes.h: what a kernel reports through its device's error word
 * (device_errors.h), shared by the host and the ahead-of-time kernels (plain C for nvcc).
 * A code is kind | (message number << 4); the host interns the messages. */
#ifndef KILN_RUNTIME_CUDA_DEVICE_ERROR_CODES_H_
#define KILN_RUNTIME_CUDA_DEVICE_ERROR_CODES_H_

#define KILN_DEVICE_ERROR_RUNTIME 1 /* RuntimeError */
#define KILN_DEVICE_ERROR_INDEX 2   /* IndexError */

#endif
