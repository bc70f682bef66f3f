// runtime/cuda/device_errors.h: bad input found by a kernel (an index out of range), reported to the
// host at its next synchronisation with the device.
//
// Note [Device-side errors]: a kernel cannot throw, and checking an index tensor's values on the host
// first would cost a synchronisation per op. As PyTorch's device-side asserts, kiln's kernels check
// as they go, skip the bad element (no out-of-bounds access happens) and report: they write a code
// into their device's error report, first report wins, with one number (the bad index) beside it.
// The report is pinned host memory mapped into the device, claimed through a word in device memory
// (Note [The error word lives in device memory], device_errors.cc), so the host reads it with no
// copy. Every place the host waits for the device (Stream/Event::Synchronize,
// kiln.cuda.synchronize, copies to the host, .item(), printing) then checks it and throws the
// error the code stands for, once. Unlike PyTorch's asserts, the
// context survives: the error is an ordinary exception and the process can go on.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/cuda/device_error_codes.h"

namespace kiln::cuda {

// The error word kernels on `device` report through, in device memory (allocated on first use): the
// claim at [0] (first report wins), at [2..3] the device address of the report, where the winner
// writes the number (an int64 at [2..3]) and then the code at [0] (tensor/cuda/kernels/common.cuh:
// ReportDeviceError).
int32_t* DeviceErrorWord(int device);

// The code a kernel writes to report `message`, raised as an IndexError (kind
// KILN_DEVICE_ERROR_INDEX) or a RuntimeError; "{}" in the message stands for the reported number.
// Codes are interned: one per distinct message.
int32_t DeviceErrorCode(int kind, const std::string& message);

// Throws the error a kernel on `device` reported since the last check, and clears it; nothing when
// none did (or no kernel ever asked for the word). Call only once the device's work is done.
void ThrowReportedDeviceError(int device);

}  // namespace kiln::cuda
