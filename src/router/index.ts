// Public surface of router/ (see ARCHITECTURE.md for what it may import).
export { parseRouterArgs, routerHelp, type RouterArgs } from './router_args.js';
export { Router, startRouter, type RunningRouter } from './router_server.js';
export { ApproxRadixTree, type TreeMatch } from './radix_tree.js';
export { CacheAwarePolicy, createPolicy, PowerOfTwoPolicy, RandomPolicy, RoundRobinPolicy, POLICY_NAMES, type CacheAwareConfig, type LoadBalancingPolicy, type PolicyName } from './policies.js';
export { CircuitBreaker, Worker, type CircuitBreakerConfig, type CircuitState } from './worker.js';
export { backoffMs, routerErrorBody } from './http_forward.js';
export { injectBootstrap, mergePrefillLogprobs, routingText, sequenceCount } from './pd_request.js';
