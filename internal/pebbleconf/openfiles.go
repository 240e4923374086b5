package pebbleconf

// openFilesShare is the part of the process's open-file limit that
// max_open_files = -1 gives the engine's files; the rest stays for client
// connections, the WAL, the MANIFEST and directories.
const (
	openFilesShareNum, openFilesShareDen = 3, 4
	// minOpenFiles is max_open_files' smallest value (RocksDB's floor):
	// -1 never gives fewer, whatever the limit.
	minOpenFiles = 20
)

// MaxOpenFiles is Pebble's MaxOpenFiles for a config's max_open_files:
// the number itself, or for -1 (RocksDB's "keep every file open") three
// quarters of the process's open-file limit, which Go raises to the hard
// limit at start.
func MaxOpenFiles(setting int) int {
	if setting >= 0 {
		return setting
	}
	return max(minOpenFiles, int(min(openFileLimit(), 1<<24)*openFilesShareNum/openFilesShareDen))
}
