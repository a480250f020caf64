/* run-model: `align run model` (run-model.c composes the model from the ops' C twins and runs its
 * steps; run-model-log.c prints each step's losses as a Megatron or a PaddleFleet trainer log line). */
#ifndef ALIGN_RUN_MODEL_H
#define ALIGN_RUN_MODEL_H

#include "run-trace.h"
#include "run.h"

struct align_ctx;

enum run_log_format { RUN_LOG_MEGATRON, RUN_LOG_PADDLE };

/* The registered ops the model runs (NULL-terminated): their switches are the model's. */
const char *const *run_model_ops(void);
/* Build the weights from o->seed and run o->steps steps, tracing into tr (when open) and printing one
 * log line per step to ctx->out. */
int run_model_steps(struct align_ctx *ctx, const struct run_opts *o, struct run_trace *tr, int log_format);
/* One step's log line: lm loss and mtp_1 loss as the framework prints them. */
int run_model_log(struct align_ctx *ctx, int log_format, int step, int steps, float lm_loss, float mtp_loss);

#endif
