/**
 * Test apps get budgets far above production's (every test signs up from
 * 127.0.0.1, and some make hundreds of calls with one key). Tests of the
 * limits themselves pass the real values as overrides, in their own app.
 */
export const GENEROUS_LIMITS: Record<string, string> = {
  SIGNUP_LIMIT_PER_HOUR: '1000000',
  LOGIN_LIMIT_PER_MINUTE: '1000000',
  API_KEY_LIMIT_PER_MINUTE: '1000000',
  SESSION_LIMIT_PER_MINUTE: '1000000',
  LOGIN_FAILURES_PER_ACCOUNT: '1000000',
  MAX_LONG_POLLS_PER_ACCOUNT: '100000',
};
