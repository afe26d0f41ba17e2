//go:build protoc

package onnxpb

// See doc.go. -M names the Go package, leaving onnx.proto as upstream has it.
//go:generate protoc --go_out=. --go_opt=paths=source_relative --go_opt=Monnx.proto=github.com/memunet/memunet/onnx/internal/onnxpb onnx.proto
