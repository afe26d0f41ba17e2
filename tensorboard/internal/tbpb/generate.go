//go:build protoc

package tbpb

// See doc.go. -M names the Go package, keeping Go options out of the proto.
//go:generate protoc --go_out=. --go_opt=paths=source_relative --go_opt=Mtensorboard.proto=github.com/memunet/memunet/tensorboard/internal/tbpb tensorboard.proto
