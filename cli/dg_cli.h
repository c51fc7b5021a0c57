/* dg_cli.h — the `dagatron` command's subcommands.
 *
 * Each subcommand lives in its own cli/cmd_<name>.c and has the signature of
 * main(): argv[0] is the subcommand's name. It returns the process exit code:
 * 0 on success, 2 (DG_EINPUT) for bad input after printing one line that
 * names the flag, file or value, 1 for internal failures.
 */
#ifndef DG_CLI_H
#define DG_CLI_H

int dg_cmd_train(int argc, char **argv);
int dg_cmd_generate(int argc, char **argv);
int dg_cmd_dump(int argc, char **argv);
int dg_cmd_preprocess(int argc, char **argv);
int dg_cmd_tokenizer(int argc, char **argv);
int dg_cmd_topo(int argc, char **argv);
int dg_cmd_cuda(int argc, char **argv);
int dg_cmd_convert(int argc, char **argv);
int dg_cmd_trace_svg(int argc, char **argv);
int dg_cmd_view(int argc, char **argv);
int dg_cmd_simulate(int argc, char **argv);
int dg_cmd_plan(int argc, char **argv);

#endif /* DG_CLI_H */
