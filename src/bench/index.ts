// Public surface of bench/ (see ARCHITECTURE.md for what it may import).
export * from './py_random.js';
export * from './py_format.js';
export * from './argparse.js';
export * from './bench_tokenizer.js';
export * from './datasets.js';
export * from './http_client.js';
export * from './download.js';
export * from './request_funcs.js';
export * from './metrics.js';
export * from './bench_serving.js';
export * from './bench_serving_args.js';
export * from './eval_common.js';
export * from './few_shot_gsm8k.js';
export * from './mmlu.js';
export * from './simple_eval_gpqa.js';
