// Package device chooses the backend a run computes on: config key device
// (auto, cpu, cuda or cuda:N) parsed once into a Spec, and Open, which gives
// the backend.Backend for it. The CPU backend is in every build; the CUDA
// backend only in a build with -tags gpu (see docs/gpu.md), and asking for
// it from the CPU build is an error that says how to get that build.
//
// A Spec is a plain value. Open returns backends that own no memory of
// their own beyond the device's context: pools over their allocators hold
// every buffer, and whoever makes a pool frees it.
package device
