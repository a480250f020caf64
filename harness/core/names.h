/* names: canonical names of the values frameworks print, so both sides of a comparison meet.
 * Built-in aliases: Megatron "lm loss" = Paddle "loss" = torchtitan loss = anchor "final_loss" ->
 * "loss"; "mtp_1 loss" = "mtp_1_loss" = anchor "mtp1.final_loss" -> "mtp_1_loss"; "grad norm" =
 * "global_norm" -> "grad_norm"; "indexer loss" -> "indexer_loss"; "learning rate" -> "learning_rate";
 * "num-zeros" = "num zeros" -> "num_zeros"; validation "lm loss" = "eval_loss" -> "eval_loss".
 * Any other name: lower case, runs of spaces, '-' and '/' become '_'. */
#ifndef ALIGN_NAMES_H
#define ALIGN_NAMES_H

#include <stddef.h>

/* Write the canonical form of name into out (always NUL-terminated). */
void names_canonical(const char *name, char *out, size_t outlen);

#endif
