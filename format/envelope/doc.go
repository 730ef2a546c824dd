// Package envelope is the one signed envelope that rampart's documents
// (snapshot, deny list, region state) share. It is a format package: it
// holds no runtime (no goroutines, watchers or metrics), so the control
// plane may import it; the runtime that watches files of these formats
// lives elsewhere.
//
// # The file
//
// An envelope file is one line of canonical JSON, its fields in this order
// and without whitespace:
//
//	{"format":F,"epoch":E,"sequence":S,"created_at_unix_nano":T,"key_id":K,
//	 "blocks":[[LEN,"sha256 hex"],...],"signature":B64,"body":BODY}
//
// followed by '\n'. F names the document's format (1 to 128 bytes of
// [A-Za-z0-9._/-], e.g. "rampart.snapshot.v2"); E and S are its Version;
// T is the signer's clock in Unix nanoseconds; K is the KeyID of the
// signing key; BODY is the format's own canonical JSON, embedded raw at the
// end so that a reader slices it out of the file without copying (Opened.Body).
//
// The blocks tile the body in order without gaps: block i is LEN bytes
// from the end of block i-1. The builder picks the boundaries (the cuts
// given to Seal; none make one block). The signature is Ed25519 over
//
//	F ‖ 0x00 ‖ E ‖ S ‖ T ‖ key id (8 bytes) ‖ manifest digest
//
// (E, S and T as uint64 big endian), where the manifest digest is SHA-256
// over LEN (uint64 big endian) ‖ sha256 of each block. Every byte of a file
// is thus covered: the header by the signature, the body through the block
// hashes. Open accepts only the exact bytes Seal writes (no other spelling
// of a number, hex digit or base64 padding), so a document has one file.
//
// # Incremental verification
//
// Open takes the document opened before as prev. A block whose claimed
// hash and length equal a block of prev and whose bytes equal those of that
// block (compared, not hashed) is not hashed again; the signature still
// covers the whole table, so a block that claims an old hash but holds other
// bytes is hashed and refused. A large document whose builder cuts it at
// stable places (content-defined cuts) is verified at the cost of its
// changed blocks plus a memory compare. Opened.Stat counts both kinds.
//
// # API
//
//   - Version{Epoch, Sequence}: Compare, Less, IsZero, String ("epoch.seq"),
//     ParseVersion.
//   - Seal(priv, format, version, created, body, cuts) writes a file.
//   - Open(file, pub, format, prev) and OpenLimit(…, maxBytes) verify one
//     (DefaultMaxFileBytes = 512 MiB) and return *Opened: Format, Version,
//     Created, KeyID, Manifest, Stat, Body(), Blocks(), Cuts().
//   - Peek(file) reads the header (format, version, created, key id,
//     manifest digest) without verifying anything, for reporting only.
//   - ContentCuts(body, min, avg, max) picks content-defined cuts (a gear
//     hash), so an edit changes only the blocks around it.
//   - Errors, for errors.Is: ErrTooLarge (over the size bound), ErrMalformed
//     (framing), ErrFormat (another format; the message names the file's),
//     ErrKeyID (key_id is not the verifying key's), ErrSignature, ErrDigest
//     (a block does not hash to its entry).
//   - Keys: GenerateKey (PEM pair), ParsePrivateKey, ParsePublicKey,
//     ReadPrivateKey, ReadPublicKey, KeyID (first 8 bytes of the public
//     key's SHA-256, hex).
//   - WriteFileAtomic(path, data, perm): temp file in the same directory,
//     fsync, rename, fsync of the directory.
//
// Open does not order versions (refusing an equal or lower one is the
// watcher's policy) and does not parse the body (the format package does).
package envelope
