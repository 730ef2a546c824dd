// Package docwatch is the runtime that feeds a signed document (snapshot,
// deny list, region state) from a file or a directory to its user: it polls,
// opens each new or changed file with the document's own open function,
// never goes back to an equal or lower version, keeps the last good
// document when a new one is bad (counting each refusal by its reason),
// persists the last good file's bytes atomically, and hands the parsed value
// to an Apply callback and to Current.
//
// The formats themselves (format/envelope and the packages on it) hold no
// runtime; this package is where the goroutine, the clock and the file
// system are.
//
// # Rules
//
//   - A file is read when its size, mtime or inode changed, and again while
//     its mtime is within 2 s of the read (a coarse file-system clock can
//     hide a rewrite); a re-read with the same bytes costs nothing more.
//     Files are read only if regular, at most MaxBytes (larger ones are
//     refused by their size, before a byte is read, as too_large).
//   - The file the document in force came from, rewritten with the same
//     bytes, is not news (in file mode: the file, whatever the state was
//     loaded from); another file of the directory with those bytes is
//     refused as stale like any other equal version.
//   - A document opens against the one in force (Open gets it as prev, so
//     a format can verify and decode incrementally).
//   - Of the documents that opened in one scan, the highest version above
//     the one in force goes through Apply; if Apply fails the next lower is
//     tried. Every other is refused as stale (older_epoch when its epoch is
//     below the one in force). In directory mode the files present at the
//     first scan that are not above the state are history and are skipped
//     without a refusal.
//   - Refusal reasons: read, too_large, malformed, format, key_id,
//     signature, digest (the envelope's errors), stale, older_epoch, apply,
//     and whatever the Reason hook names (e.g. invalid).
//   - The applied file's bytes are written to StatePath (temp file, fsync,
//     rename, fsync of the directory); LoadState applies them at start, so a
//     restart without a source serves the last good document.
package docwatch
