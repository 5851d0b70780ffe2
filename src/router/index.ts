// Public surface of router/ (see ARCHITECTURE.md for what it may import).
export { parseRouterArgs, routerHelp, type RouterArgs } from './router_args.js';
export { FLAGS, GROUPS, POLICY_CHOICES, PREFILL_POLICY_CHOICES, type FlagSpec } from './router_flags.js';
export { newRequestId, Router, startRouter, type RunningRouter } from './router_server.js';
export { ApproxRadixTree, type TreeMatch } from './radix_tree.js';
export { CacheAwarePolicy, createPolicy, PowerOfTwoPolicy, RandomPolicy, RoundRobinPolicy, POLICY_NAMES, type CacheAwareConfig, type LoadBalancingPolicy, type PolicyConfig, type PolicyName, type SelectInfo } from './policies.js';
export { ManualPolicy, type AssignmentMode, type ManualConfig } from './manual_policy.js';
export { BucketPolicy, type BucketConfig } from './bucket_policy.js';
export { AdmissionControl, TokenBucket, type Admission } from './admission.js';
export { CircuitBreaker, Worker, type CircuitBreakerConfig, type CircuitState } from './worker.js';
export { backoffMs, forward, readBody, routerErrorBody } from './http_forward.js';
export { injectBootstrap, routingText, sequenceCount, wantsLogprob } from './pd_request.js';
export { mergeCompletionLogprobs, mergeGenerateLogprobs, mergePrefillAnswer, streamLogprobMerger } from './logprob_merge.js';
