// Package cuda is the CUDA backend, in the build with -tags gpu only: a
// backend.Backend whose buffers live in one GPU's memory (memory.Pool over
// the device's pages where it has virtual memory management: one
// reservation, cuMemCreate and cuMemMap per 2 MiB page, cuMemUnmap after a
// device sync when the pool moves a page; cuMemAlloc segments elsewhere,
// and for the arena) and whose operations are memunet's own kernels
// (kernels/*.cu), compiled into fatbins (machine code for sm_80, sm_86,
// sm_89 and sm_90, and compute_80 PTX that the driver JIT-compiles for any
// newer GPU) embedded in the binary.
// It uses the CUDA driver API only (backend/cuda/driverapi opens
// libcuda.so.1 at first use), so a binary runs on any newer driver and
// needs no CUDA runtime or cuBLAS; cuDNN, where cuda.conv finds one, is
// opened at run time too (backend/cuda/cudnn) and computes the
// convolutions in place of memunet's kernels (see below).
//
// Invariants and ownership:
//   - Every operation runs on the compute stream (the default stream), in
//     issue order; host values (losses, counts, flags, downloads) wait for
//     the work before them. The offload copies (ToHost, ToDevice) run on a
//     copy stream beside it, ordered by events (streams.go): each starts
//     once the compute stream has finished the work before it, and
//     compute work that touches its device bytes waits for it, so a buffer
//     the pool frees during a copy is not written before the copy has
//     passed it. Profiles time the device's work with events (Clock). The first error the device reports is kept, with the
//     launches it had not finished (kernel, operation, grid, arguments), as
//     a *FaultError that Sync and every later call return; nothing more is
//     issued after it, and downloads come back zeroed. With sync launches
//     (cuda.sync_launches, MEMUNET_CUDA_SYNC=1) each launch is waited for,
//     so the error names its kernel. Nothing panics on a device error.
//   - The tensor-core kernels are built twice: for one block an SM (the
//     default, no spill) and for two (MEMUNET_CUDA_TC_BLOCKS=2, TCBlocksEnv:
//     128 registers, a few bytes of stack), which the device check times
//     beside the default; the variable is read when the device is opened.
//   - Operations allocate nothing from the pool: memunet's convolutions
//     are implicit GEMMs (ConvWorkspace is a split weight gradient's
//     partial sums, or 0). The backend's only memory of its own is a fixed
//     scratch area for the reductions, allocated when the device is opened
//     and counted, with the context, in the device's overhead.
//   - A training step reads the device once (backend.StepRecorder,
//     record.go): each micro-batch's plain cross-entropy is summed on the
//     device into a slot of the scratch area, its gradient takes its count
//     from there, and the slots and the gradients' finite flag come back
//     in one copy after the step's last backward; the other losses leave
//     their value there, their sums kept for their gradient's
//     coefficients, which are formed on the device too.
//     Steps may instead queue (backend.StepQueue, queue.go): each has an
//     entry in the scratch area whose finite flag the optimizer kernels
//     read (skipping the step there), with its loss scale and Adam's
//     factors from the step count and grad scaler the device keeps, and
//     where the trainer clips, the gradients' norm and clipping factor
//     (SumSquares' kernels); a window of up to 64 steps is read in one
//     copy.
//   - Uploads are staged through a few pinned buffers on the copy stream
//     (upload.go), so a micro-batch's upload does not wait for the work
//     before it (cuMemcpyHtoD from pageable memory does); the host waits
//     only for the copy that last used a buffer.
//   - A convolution library (ConvLibrary: cuDNN, cuda.conv) may compute
//     the convolutions instead, 2D and 3D (library.go): per shape, its Find's
//     results and the algorithm policy (backend/cuda/cudnn) choose each
//     pass's algorithm once, and ConvWorkspace is the workspace the chosen
//     ones take (and a 16-bit weight gradient's staging), so the model
//     takes it from the pool and the plan counts it. The transposed
//     convolution is that library's backward data pass, as in PyTorch;
//     bias_add and accumulate add what the library leaves out.
//   - The driver keeps one primary context per device and process, so Open
//     returns one Backend per device ordinal for the whole process; each
//     call makes the context current on its (locked) OS thread.
//   - The convolutions run on the tensor cores through WMMA
//     (backend/cuda/kernels/tc.cu): 16-bit tensors as they are, fp16 or
//     bf16 operands with fp32 sums; fp32 tensors on TF32 operands (SetTF32,
//     config key cuda.tf32, on by default) or exactly on the CUDA cores
//     (backend/cuda/kernels/gemm.cu). Every other layer operation takes
//     16-bit tensors as they are too (widening each value, rounding each
//     result), as the CPU does: Stages is false, so no layer stages
//     anything through fp32 and a 16-bit plan is as small as the CPU's.
//   - Reductions are deterministic: a norm's statistics and gradient
//     sums, a bias gradient and a loss's sums are float64 sums over chunks
//     that depend on the shape alone, many blocks a channel, group or
//     class, added in a fixed order by a second pass (reduce.go): the same
//     bits run to run and at any grid size. No float atomics anywhere.
//
// The fatbins are generated with nvcc from the CUDA toolkit (go generate
// -tags cudagen ./backend/cuda: cudagen.go) and committed with the sums of
// the sources they were made from (kernels/fatbin.sum), so building needs
// no CUDA toolkit and running only the driver's library. Plain go generate
// ./... needs no toolkit: it copies the .cu sources into backend/cuda/emu,
// whose build then sees every change to them (the go command tracks only
// the files of a package's own directory), and writes ops_gen.go, the
// emulator's dispatch and the methods of the pointwise operations from
// the table of operations (backend/ops.go).
package cuda

//go:generate cp kernels/ops.cu emu/ops_cu.h
//go:generate cp kernels/gemm.cu emu/gemm_cu.h
//go:generate cp kernels/tc.cu emu/tc_cu.h
//go:generate cp kernels/half.h emu/half.h
