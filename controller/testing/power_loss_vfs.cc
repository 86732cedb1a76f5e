#include "controller/testing/power_loss_vfs.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

#include "common/file_util.h"
#include "common/status.h"

namespace crest::controller::testing {

// The shim's file: our header, then the real VFS's file right behind it.
struct PowerLossVfs::File {
  sqlite3_file base;
  PowerLossVfs* owner;
  const sqlite3_io_methods* real_methods;
  std::string* path;  // null for files without a name (temporary)
  sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
};

namespace {

PowerLossVfs::File* Shim(sqlite3_file* f) { return reinterpret_cast<PowerLossVfs::File*>(f); }
sqlite3_file* Real(sqlite3_file* f) { return Shim(f)->real(); }
const sqlite3_io_methods* M(sqlite3_file* f) { return Shim(f)->real_methods; }

int Read(sqlite3_file* f, void* b, int n, sqlite3_int64 o) { return M(f)->xRead(Real(f), b, n, o); }
int Write(sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
  return M(f)->xWrite(Real(f), b, n, o);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) { return M(f)->xTruncate(Real(f), size); }
int FileSize(sqlite3_file* f, sqlite3_int64* size) { return M(f)->xFileSize(Real(f), size); }
int Lock(sqlite3_file* f, int l) { return M(f)->xLock(Real(f), l); }
int Unlock(sqlite3_file* f, int l) { return M(f)->xUnlock(Real(f), l); }
int CheckReservedLock(sqlite3_file* f, int* out) { return M(f)->xCheckReservedLock(Real(f), out); }
int FileControl(sqlite3_file* f, int op, void* arg) { return M(f)->xFileControl(Real(f), op, arg); }
int SectorSize(sqlite3_file* f) { return M(f)->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) { return M(f)->xDeviceCharacteristics(Real(f)); }
int ShmMap(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
  return M(f)->xShmMap(Real(f), page, size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return M(f)->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { M(f)->xShmBarrier(Real(f)); }
int ShmUnmap(sqlite3_file* f, int del) { return M(f)->xShmUnmap(Real(f), del); }
int Fetch(sqlite3_file* f, sqlite3_int64 o, int n, void** out) {
  return M(f)->xFetch(Real(f), o, n, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 o, void* p) { return M(f)->xUnfetch(Real(f), o, p); }

// The rest of the VFS goes straight to the real one.
// pAppData's first member is the real VFS (PowerLossVfs::Link).
sqlite3_vfs* RealVfs(sqlite3_vfs* vfs) { return *static_cast<sqlite3_vfs**>(vfs->pAppData); }
int Access(sqlite3_vfs* v, const char* n, int f, int* out) {
  return RealVfs(v)->xAccess(RealVfs(v), n, f, out);
}
int FullPathname(sqlite3_vfs* v, const char* n, int size, char* out) {
  return RealVfs(v)->xFullPathname(RealVfs(v), n, size, out);
}
int Randomness(sqlite3_vfs* v, int n, char* out) {
  return RealVfs(v)->xRandomness(RealVfs(v), n, out);
}
int Sleep(sqlite3_vfs* v, int us) { return RealVfs(v)->xSleep(RealVfs(v), us); }
int CurrentTime(sqlite3_vfs* v, double* out) { return RealVfs(v)->xCurrentTime(RealVfs(v), out); }
int CurrentTimeInt64(sqlite3_vfs* v, sqlite3_int64* out) {
  return RealVfs(v)->xCurrentTimeInt64(RealVfs(v), out);
}
int GetLastError(sqlite3_vfs* v, int n, char* out) {
  return RealVfs(v)->xGetLastError(RealVfs(v), n, out);
}

}  // namespace

PowerLossVfs::PowerLossVfs() : real_(sqlite3_vfs_find(nullptr)) {
  vfs_.iVersion = 2;
  vfs_.szOsFile = static_cast<int>(sizeof(File)) + real_->szOsFile;
  vfs_.mxPathname = real_->mxPathname;
  vfs_.zName = "crest-power-loss";
  vfs_.pAppData = &link_;
  vfs_.xOpen = &PowerLossVfs::Open;
  vfs_.xDelete = &PowerLossVfs::Delete;
  vfs_.xAccess = &Access;
  vfs_.xFullPathname = &FullPathname;
  vfs_.xRandomness = &Randomness;
  vfs_.xSleep = &Sleep;
  vfs_.xCurrentTime = &CurrentTime;
  vfs_.xGetLastError = &GetLastError;
  vfs_.xCurrentTimeInt64 = &CurrentTimeInt64;
  methods_.iVersion = 3;
  methods_.xClose = &PowerLossVfs::Close;
  methods_.xRead = &Read;
  methods_.xWrite = &Write;
  methods_.xTruncate = &Truncate;
  methods_.xSync = &PowerLossVfs::Sync;
  methods_.xFileSize = &FileSize;
  methods_.xLock = &Lock;
  methods_.xUnlock = &Unlock;
  methods_.xCheckReservedLock = &CheckReservedLock;
  methods_.xFileControl = &FileControl;
  methods_.xSectorSize = &SectorSize;
  methods_.xDeviceCharacteristics = &DeviceCharacteristics;
  methods_.xShmMap = &ShmMap;
  methods_.xShmLock = &ShmLock;
  methods_.xShmBarrier = &ShmBarrier;
  methods_.xShmUnmap = &ShmUnmap;
  methods_.xFetch = &Fetch;
  methods_.xUnfetch = &Unfetch;
  sqlite3_vfs_register(&vfs_, 1);
}

PowerLossVfs::~PowerLossVfs() {
  sqlite3_vfs_unregister(&vfs_);
  sqlite3_vfs_register(real_, 1);
}

int PowerLossVfs::Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags,
                       int* out) {
  PowerLossVfs* owner = Owner(vfs);
  File* shim = Shim(file);
  shim->base.pMethods = nullptr;
  int rc = owner->real_->xOpen(owner->real_, name, shim->real(), flags, out);
  if (shim->real()->pMethods == nullptr) return rc;
  shim->owner = owner;
  shim->real_methods = shim->real()->pMethods;
  shim->path = name != nullptr ? new std::string(name) : nullptr;
  shim->base.pMethods = &owner->methods_;
  if (shim->path != nullptr) {
    // What the file held when first opened counts as durable (an empty file
    // when new); later writes only once synced.
    absl::MutexLock lock(&owner->mu_);
    if (owner->durable_.count(*shim->path) == 0) {
      owner->durable_[*shim->path] = ReadFileToString(*shim->path).value_or("");
    }
  }
  return rc;
}

int PowerLossVfs::Delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
  PowerLossVfs* owner = Owner(vfs);
  {
    absl::MutexLock lock(&owner->mu_);
    owner->durable_.erase(name);
  }
  return owner->real_->xDelete(owner->real_, name, sync_dir);
}

int PowerLossVfs::Sync(sqlite3_file* file, int flags) {
  File* shim = Shim(file);
  int rc = shim->real_methods->xSync(shim->real(), flags);
  if (rc != SQLITE_OK || shim->path == nullptr) return rc;
  auto bytes = ReadFileToString(*shim->path);
  if (!bytes.ok()) return SQLITE_IOERR_FSYNC;
  absl::MutexLock lock(&shim->owner->mu_);
  shim->owner->durable_[*shim->path] = *bytes;
  ++shim->owner->syncs_[std::filesystem::path(*shim->path).filename().string()];
  return rc;
}

int PowerLossVfs::Close(sqlite3_file* file) {
  File* shim = Shim(file);
  int rc = shim->real_methods->xClose(shim->real());
  delete shim->path;
  shim->path = nullptr;
  return rc;
}

absl::Status PowerLossVfs::PowerCut(const std::string& dir) {
  CREST_RETURN_IF_ERROR(MakeDirectories(dir));
  absl::MutexLock lock(&mu_);
  for (const auto& [path, bytes] : durable_) {
    std::string name = std::filesystem::path(path).filename().string();
    CREST_RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(dir, "/", name), bytes));
  }
  return absl::OkStatus();
}

std::map<std::string, int> PowerLossVfs::SyncCounts() {
  absl::MutexLock lock(&mu_);
  return syncs_;
}

}  // namespace crest::controller::testing
