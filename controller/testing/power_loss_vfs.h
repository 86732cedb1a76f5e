// A SQLite VFS for tests that simulates a power cut: it passes everything to
// the default VFS and keeps, per file, a copy of its contents as of its last
// xSync (a file's contents when first opened count as synced: empty for a new
// one). PowerCut() writes those copies (and nothing else) to a directory: the
// files as the disk would hold them had the power gone at that moment, given
// that writes not followed by an fsync of their file may be lost. Registered
// as the default VFS while an instance lives. Not modelled: a torn sector
// within a synced write, and directory entries (created and removed files
// are taken as durable).
#pragma once

#include <sqlite3.h>

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace crest::controller::testing {

class PowerLossVfs {
 public:
  PowerLossVfs();   // registers as the default VFS
  ~PowerLossVfs();  // unregisters, putting the previous default back
  PowerLossVfs(const PowerLossVfs&) = delete;
  PowerLossVfs& operator=(const PowerLossVfs&) = delete;

  // Writes the durable image of every file opened so far into `dir` (same
  // base names).
  absl::Status PowerCut(const std::string& dir);
  // How many xSync calls reached each file (base name) so far.
  std::map<std::string, int> SyncCounts();

  struct File;  // the shim's sqlite3_file (power_loss_vfs.cc)

 private:
  static int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out);
  static int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir);
  static int Sync(sqlite3_file* file, int flags);
  static int Close(sqlite3_file* file);

  // What the VFS's pAppData points to.
  struct Link {
    sqlite3_vfs* real;
    PowerLossVfs* owner;
  };
  static PowerLossVfs* Owner(sqlite3_vfs* vfs) { return static_cast<Link*>(vfs->pAppData)->owner; }

  sqlite3_vfs* real_;
  Link link_{real_, this};
  sqlite3_vfs vfs_{};
  sqlite3_io_methods methods_{};
  absl::Mutex mu_;
  std::map<std::string, std::string> durable_ ABSL_GUARDED_BY(mu_);  // path -> synced bytes
  std::map<std::string, int> syncs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace crest::controller::testing
