package deny

import "hash/crc32"

// Block cuts. A deny file's body is signed as a table of blocks (see the
// package doc), cut where the content says, so that adding or removing an
// entry changes only the block it falls in and a reader holding the
// previous list hashes and decodes only that block. A block ends right
// after the comma that follows a record when, counted from the block's
// start to that point, it is at least MinBlockBytes long and the record's
// CRC-32C has its low cutBits bits zero, or it is at least MaxBlockBytes
// long. So blocks average about 2^cutBits records (~80 KiB of CIDR
// entries), and the cuts are a function of the list: Parse refuses a file
// cut anywhere else.
const (
	MinBlockBytes = 8 << 10
	MaxBlockBytes = 512 << 10
	cutBits       = 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// cutter applies the rule record by record from a block start.
type cutter struct{ start int }

// after reports whether a block ends at end, the offset just past the
// comma that follows record rec; if so the next block starts there.
func (c *cutter) after(rec []byte, end int) bool {
	n := end - c.start
	if n < MinBlockBytes || n < MaxBlockBytes && crc32.Checksum(rec, castagnoli)&(1<<cutBits-1) != 0 {
		return false
	}
	c.start = end
	return true
}

// cutCheck checks a body's block boundaries against the rule while the
// body is decoded record by record.
type cutCheck struct {
	cuts []int // where blocks after the first start, ascending
	k    int   // cuts matched so far
	c    cutter
}

// at is given each record and the offset past its comma; false when the
// rule and the file disagree about a block ending there.
func (cc *cutCheck) at(rec []byte, end int) bool {
	fire := cc.c.after(rec, end)
	want := cc.k < len(cc.cuts) && cc.cuts[cc.k] == end
	if want {
		cc.k++
	}
	return fire == want
}

// done reports whether every cut of the file fell where the rule put one.
func (cc *cutCheck) done() bool { return cc.k == len(cc.cuts) }
