package zkwatch

import (
	"testing"

	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }
