/* dg_model_record.h — the model config as a checkpoint's config record.
 *
 * Checkpoints (io/dg_checkpoint.h) store a record of named numbers and know
 * nothing of the model. This is the translation, above both io/ and moe/:
 * every dg_model_config field under its struct name (the keys checkpoints
 * have always had, so older checkpoints read the same), and which fields are
 * architecture — they shape the parameters or change what they compute
 * (layers, sizes, heads, experts, top-k, norms, router, RoPE base ...) and
 * must agree for a checkpoint to load. Training settings (sequence length,
 * micro-batch size, loss coefficients, capacity factor, EP layout) may
 * differ.
 */
#ifndef DG_MODEL_RECORD_H
#define DG_MODEL_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#include "dg_checkpoint.h"
#include "dg_model.h"

/* One dg_model_config field as the record stores it. */
typedef struct dg_model_field {
    const char *name; /* the struct field's name, also the record's key */
    const char *flag; /* the flag that sets it, for messages */
    size_t offset, size;
    char kind;        /* 'i' int, 'd' double */
    bool arch;        /* must match to load (dg_model_check_record) */
} dg_model_field;

/* All fields of dg_model_config, in declaration order. */
const dg_model_field *dg_model_fields(int *n);

/* c as a record (every field, in declaration order). DG_EINTERNAL only if
 * the table outgrows DG_CKPT_CONFIG_MAX. */
int dg_model_to_record(const dg_model_config *c, dg_ckpt_config *rec, dg_err *err);

/* The model a record describes. DG_EINPUT naming `where` and the field when
 * one is missing, or an int field is not an integer in int's range. */
int dg_model_from_record(const dg_ckpt_config *rec, dg_model_config *c, const char *where, dg_err *err);

/* Does the checkpoint's model (its record) have the architecture of `run`
 * (a dg_model_config)? DG_EINPUT naming `where`, the field, both values and
 * its flag. The signature is dg_ckpt_expect.check's. */
int dg_model_check_record(const dg_ckpt_config *ckpt, const void *run, const char *where, dg_err *err);

/* The dg_ckpt_load check that a checkpoint's architecture is run's. */
static inline dg_ckpt_expect dg_model_expect(const dg_model_config *run) {
    return (dg_ckpt_expect){dg_model_check_record, run};
}

#endif /* DG_MODEL_RECORD_H */
