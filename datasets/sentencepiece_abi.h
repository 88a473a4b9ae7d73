/* The C interface of libdistrain_sentencepiece.so, the plugin that holds Debian's
 * libsentencepiece. That library carries its own protobuf runtime (3.14) with public
 * symbols, which abort a process that also holds the protobuf 3.21 of the ONNX export: the
 * plugin is opened with its own symbol scope (sentencepiece_library.cpp), and only C types
 * cross this line. Every function that can fail writes a message into err (errlen bytes)
 * and returns a negative value or null. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_sp_model dt_sp_model;
/* Receives bytes the plugin made (a trained model). */
typedef void (*dt_sp_sink)(void* context, const char* bytes, size_t size);

/* A model from a .model file's bytes (a serialized ModelProto). */
dt_sp_model* dt_sp_load(const char* bytes, size_t size, char* err, size_t errlen);
void dt_sp_free(dt_sp_model* model);
int32_t dt_sp_vocab_size(const dt_sp_model* model);
/* The end-of-sentence id (</s>), -1 where the model has none. */
int32_t dt_sp_eos(const dt_sp_model* model);
/* The ids of text[0, size): their count, of which at most capacity are written to ids. */
int64_t dt_sp_encode(const dt_sp_model* model, const char* text, size_t size, int32_t* ids, size_t capacity, char* err,
                     size_t errlen);
/* The text of ids: its length, of which at most capacity bytes are written to out. */
int64_t dt_sp_decode(const dt_sp_model* model, const int32_t* ids, size_t count, char* out, size_t capacity, char* err,
                     size_t errlen);
/* Trains a model with SentencePiece's trainer on the lines of text[0, size) under the
 * trainer's flags ("--vocab_size=2000 --model_type=bpe ..."); the model's bytes go to sink.
 * 0 on success. */
int dt_sp_train(const char* flags, const char* text, size_t size, dt_sp_sink sink, void* context, char* err,
                size_t errlen);

#ifdef __cplusplus
}
#endif
