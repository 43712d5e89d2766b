import { expect } from 'chai';
import { ipRateSubject } from './client-ip.js';

describe('per-IP rate subject', () => {
  it('counts an IPv4 address as itself, also when IPv4-mapped', () => {
    expect(ipRateSubject('203.0.113.7')).to.equal('203.0.113.7');
    expect(ipRateSubject('::ffff:203.0.113.7')).to.equal('203.0.113.7');
    expect(ipRateSubject('::FFFF:127.0.0.1')).to.equal('127.0.0.1');
  });

  it('counts every IPv6 address of one /64 together', () => {
    const a = ipRateSubject('2001:db8:1:2:aaaa::1');
    expect(a).to.equal('2001:0db8:0001:0002::/64');
    expect(ipRateSubject('2001:db8:1:2:ffff:ffff:ffff:ffff')).to.equal(a);
    expect(ipRateSubject('2001:DB8:1:2::9')).to.equal(a);
    expect(ipRateSubject('2001:db8:1:3::1')).to.not.equal(a);
    expect(ipRateSubject('::1')).to.equal('0000:0000:0000:0000::/64');
    expect(ipRateSubject('fe80::1%eth0')).to.equal('fe80:0000:0000:0000::/64');
  });

  it('keeps anything else bounded', () => {
    expect(ipRateSubject('')).to.equal('unknown');
    expect(ipRateSubject('x'.repeat(500))).to.have.length(64);
  });
});
