// Package onnxpb is ONNX's protobuf messages, generated from onnx.proto
// (ONNX 1.12, IR version 8, as Debian's python3-onnx ships it, unchanged)
// by protoc-gen-go; generate.go holds the command, behind the protoc build
// tag so that a plain go generate needs no protoc. Never edit onnx.pb.go:
// with Debian's protobuf-compiler and protoc-gen-go at go.mod's
// google.golang.org/protobuf version on PATH, run
//
//	go generate -tags protoc ./onnx/internal/onnxpb
package onnxpb
