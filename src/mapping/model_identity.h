// Which model file a process serves, as a short hex string. The pipeline
// coordinator refuses a worker whose file differs (a different quantization,
// another seed of the same shape, a truncated copy), since its activations
// would silently mean something else; the server's disk KV cache never loads
// a snapshot another file wrote.
#pragma once

#include <string>

namespace ds4 {

class GgufFile;

// A hash of the file's size, its whole header (metadata and tensor table)
// and 64 KiB samples spread over the tensor data (cheap for a 150 GB file,
// yet two files of one shape but other weights differ); for a shard
// (ds4-gguf split), the identity of the file it was cut from. Throws ds4::Error
// when the file cannot be read.
std::string model_identity(const GgufFile& file);

}  // namespace ds4
