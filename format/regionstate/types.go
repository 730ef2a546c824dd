package regionstate

import (
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// Format is the envelope format name of a region-state document.
const Format = "rampart.regionstate.v1"

// State is one verified region-state document (immutable once parsed).
type State struct {
	Version   envelope.Version // (epoch, sequence) of this document
	Created   time.Time        // when the producer signed it
	Regions   []Region         // sorted by Name, unique
	Platforms []Platform       // sorted by Name, unique
}

// Region is the state of one region.
type Region struct {
	Name          string
	Healthy       bool
	ConfigVersion envelope.Version // the snapshot version the region serves
	Draining      bool             // operator drain (next issue); false = not draining
}

// Platform is the state of one backend platform: a cluster set that shares
// one database.
type Platform struct {
	Name        string
	Writer      string    // current writer region ("" = none known)
	WriterEpoch uint64    // fencing epoch of the writer switch
	Replicas    []Replica // sorted by Region, unique
}

// Replica is one region's replica of a platform's database.
type Replica struct {
	Region     string
	LagMs      uint64
	ObservedAt time.Time
}
