#include "backend/backend.h"

#include "common/error.h"

namespace ds4 {

void Backend::throw_missing_pack(const char* family) const {
    throw Error("the " + name() + " backend cannot run " + family + " models (it has no " + family + " op pack).");
}

}  // namespace ds4
