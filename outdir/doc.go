// Package outdir is a folder a command writes its results into: a run,
// predict's or compare's --out, eval's <run>/eval, an export's folder.
//
// Four promises:
//   - One process at a time (Acquire). A writer holds an exclusive lock on
//     DIR/.lock for as long as it writes there. The lock is flock(2) where
//     the file system has it, so the kernel drops it when the process ends,
//     however it ends (SIGKILL included), and nothing is left to clean up;
//     elsewhere an O_EXCL lock file whose holder is checked for staleness by
//     pid on the same host. The file records who holds it (pid, host,
//     command, start), so a second writer is refused at once by name.
//     Readers (predict from a run still training, plan, compare --runs)
//     take no lock and read only complete checkpoints.
//   - Files that appear whole or not at all, never through a link
//     (WriteFile; Create and Commit for one written while a command runs):
//     a temporary file made new in the same folder, synced, then renamed
//     over the name, which replaces a symlink planted there instead of
//     writing through it. A process killed mid-write leaves only its
//     temporary file (.NAME.tmp-N, N a uint32 in decimal, IsTemp), which
//     the next writer holding the folder's lock may remove; a name so long
//     that this would pass 255 bytes is cut short at a character's start,
//     so any name a file may have can be written. IsTemp knows only that
//     exact form: a user's file that merely holds ".tmp-" is not one.
//   - Outputs are regular files and folders (CheckTarget): a path that
//     exists and is a device, a FIFO or a socket (or a folder where a file
//     goes, a file where a folder goes) is refused by name before anything
//     is written, and never replaced: renaming a file over /dev/null (as
//     root) would take it from the whole machine. Commands check their
//     --out before any work; WriteFile, Create and Commit, Append and
//     Acquire (its folder and its lock file) check again as they write,
//     and a file they open is checked once more on its descriptor, opened
//     without blocking (a FIFO never waits for a reader). A symlink at a
//     file's path is replaced whatever it points to, a device included:
//     the link goes, what it points to is never opened. A folder's link is
//     followed, so it must lead to a folder.
//   - A cut-off write that names its files (Journal): a command that
//     writes many files lists each in DIR/.unfinished, synced, before it
//     is written, and removes that list when it has finished. A process
//     killed midway (SIGKILL) leaves the list, so the next writer knows
//     exactly which files were the cut-off write's (ReadJournal) and can
//     remove those and nothing else (Unfinished.Remove).
//
// The lock file and a journal are the only state; a Lock value owns its
// open descriptor and gives it back in Release (the file stays, recording
// the last holder) or Clear (the file goes, and the folder too if Acquire made it and it is
// empty). A flock is taken only on the file still at DIR/.lock, so that
// removing it in Clear cannot let two writers hold two files. A Pending
// owns its temporary file until Commit (renamed into place) or Close
// (removed); a Journal its open list until Finish (removed) or Close
// (left for the caller).
package outdir
