package cpu_test

import (
	"testing"

	"github.com/memunet/memunet/backend/backendtest"
	"github.com/memunet/memunet/backend/cpu"
)

func TestConformance(t *testing.T) { backendtest.Run(t, cpu.New()) }
